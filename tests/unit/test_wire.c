/*
 * test_wire.c: wire protocol framing: OP_MSG / OP_QUERY parsing, reply
 * building, checksums, and robustness against truncated or malformed input.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "net/wire.h"

/* A growable byte buffer for hand-assembling messages. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf_t;

static void
put(buf_t *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void
put_i32(buf_t *b, int32_t v)
{
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

static void
put_u8(buf_t *b, uint8_t v)
{
    put(b, &v, 1);
}

static void
put_doc(buf_t *b, const bson_t *d)
{
    put(b, bson_get_data(d), d->len);
}

static void
patch_i32(buf_t *b, size_t at, int32_t v)
{
    b->p[at] = (uint8_t)v;
    b->p[at + 1] = (uint8_t)(v >> 8);
    b->p[at + 2] = (uint8_t)(v >> 16);
    b->p[at + 3] = (uint8_t)(v >> 24);
}

/* Starts a message: header with a placeholder length. */
static void
begin(buf_t *b, int32_t opcode)
{
    b->n = 0;
    put_i32(b, 0);
    put_i32(b, 77);
    put_i32(b, 0);
    put_i32(b, opcode);
}

static void
finish(buf_t *b)
{
    patch_i32(b, 0, (int32_t)b->n);
}

/* Parses a private, exactly-sized copy so ASan catches any overread. */
static int
parse_copy(const uint8_t *src, size_t n, mf_msg_t *msg, mf_error_t *err, uint8_t **keep)
{
    uint8_t *c = malloc(n ? n : 1);
    memcpy(c, src, n);
    *keep = c;
    return mf_wire_parse(c, n, msg, err);
}

/* Builds an OP_MSG with body {insert: "c"} and a "documents" sequence of n docs. */
static void
build_insert(buf_t *b, int ndocs)
{
    bson_t *body = BCON_NEW("insert", "c", "$db", "test");
    size_t szpos;

    begin(b, MF_OP_MSG);
    put_i32(b, 0);
    put_u8(b, 0);
    put_doc(b, body);
    put_u8(b, 1);
    szpos = b->n;
    put_i32(b, 0);
    put(b, "documents", 10);
    for (int i = 0; i < ndocs; i++) {
        bson_t *d = BCON_NEW("_id", BCON_INT32(i), "s", "xyz");
        put_doc(b, d);
        bson_destroy(d);
    }
    patch_i32(b, szpos, (int32_t)(b->n - szpos));
    finish(b);
    bson_destroy(body);
}

Test(wire, crc32c_matches_the_standard_check_value)
{
    cr_assert_eq(mf_crc32c((const uint8_t *)"123456789", 9), 0xE3069283u, "got 0x%08X",
                 mf_crc32c((const uint8_t *)"123456789", 9));
    cr_assert_eq(mf_crc32c((const uint8_t *)"", 0), 0u);
}

Test(wire, header_decodes_little_endian_fields)
{
    uint8_t h[16] = {0x10, 0, 0, 0, 0x01, 0x02, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xdd, 0x07, 0, 0};
    mf_msg_header_t hdr;
    mf_wire_read_header(h, &hdr);
    cr_assert_eq(hdr.length, 16);
    cr_assert_eq(hdr.request_id, 0x0201);
    cr_assert_eq(hdr.response_to, -1);
    cr_assert_eq(hdr.opcode, 2013);
}

Test(wire, op_msg_round_trips_through_builder_and_parser)
{
    bson_t *body = BCON_NEW("hello", BCON_INT32(1), "$db", "admin");
    size_t len;
    uint8_t *m = mf_wire_build_msg(5, 9, 0, body, &len);
    mf_msg_t msg;
    mf_error_t err = {0};

    cr_assert_eq(len, 21 + body->len);
    cr_assert_eq(mf_wire_parse(m, len, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.hdr.request_id, 5);
    cr_assert_eq(msg.hdr.response_to, 9);
    cr_assert_eq(msg.hdr.opcode, MF_OP_MSG);
    cr_assert_eq(msg.flags, 0u);
    cr_assert_eq(msg.nseqs, 0u);
    cr_assert(bson_equal(&msg.body, body));
    mf_wire_msg_destroy(&msg);
    free(m);
    bson_destroy(body);
}

Test(wire, op_msg_with_checksum_verifies_and_rejects_corruption)
{
    bson_t *body = BCON_NEW("ping", BCON_INT32(1));
    size_t len;
    uint8_t *m = mf_wire_build_msg(1, 0, MF_MSG_CHECKSUM_PRESENT, body, &len);
    mf_msg_t msg;
    mf_error_t err = {0};

    cr_assert_eq(mf_wire_parse(m, len, &msg, &err), 0, "%s", err.msg);
    cr_assert(bson_equal(&msg.body, body));
    mf_wire_msg_destroy(&msg);

    m[len - 8] ^= 0x01; /* flip a bit inside the body */
    cr_assert_eq(mf_wire_parse(m, len, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_ProtocolError, "code %d", err.code);
    cr_assert(strstr(err.msg, "checksum") != NULL, "%s", err.msg);
    m[len - 8] ^= 0x01;
    m[len - 1] ^= 0x80; /* corrupt the checksum itself */
    cr_assert_eq(mf_wire_parse(m, len, &msg, &err), -1);
    free(m);
    bson_destroy(body);
}

Test(wire, document_sequence_with_several_documents_is_parsed)
{
    buf_t b = {0};
    mf_msg_t msg;
    mf_error_t err = {0};

    build_insert(&b, 5);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.nseqs, 1u);
    cr_assert_str_eq(msg.seqs[0].identifier, "documents");
    cr_assert_eq(msg.seqs[0].ndocs, 5u, "ndocs %zu", msg.seqs[0].ndocs);
    for (int i = 0; i < 5; i++) {
        bson_iter_t it;
        cr_assert(bson_iter_init_find(&it, &msg.seqs[0].docs[i], "_id"));
        cr_assert_eq(bson_iter_int32(&it), i);
    }
    mf_wire_msg_destroy(&msg);
    free(b.p);
}

Test(wire, empty_document_sequence_is_allowed)
{
    buf_t b = {0};
    mf_msg_t msg;
    mf_error_t err = {0};

    build_insert(&b, 0);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.nseqs, 1u);
    cr_assert_eq(msg.seqs[0].ndocs, 0u);
    mf_wire_msg_destroy(&msg);
    free(b.p);
}

Test(wire, two_sequences_and_body_after_sequence_are_parsed)
{
    buf_t b = {0};
    bson_t *body = BCON_NEW("update", "c");
    bson_t *d = BCON_NEW("q", "{", "}", "u", "{", "}");
    mf_msg_t msg;
    mf_error_t err = {0};
    size_t at;

    begin(&b, MF_OP_MSG);
    put_i32(&b, 0);
    put_u8(&b, 1);
    at = b.n;
    put_i32(&b, 0);
    put(&b, "updates", 8);
    put_doc(&b, d);
    put_doc(&b, d);
    patch_i32(&b, at, (int32_t)(b.n - at));
    put_u8(&b, 0);
    put_doc(&b, body);
    put_u8(&b, 1);
    at = b.n;
    put_i32(&b, 0);
    put(&b, "other", 6);
    put_doc(&b, d);
    patch_i32(&b, at, (int32_t)(b.n - at));
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.nseqs, 2u);
    cr_assert_str_eq(msg.seqs[0].identifier, "updates");
    cr_assert_eq(msg.seqs[0].ndocs, 2u);
    cr_assert_str_eq(msg.seqs[1].identifier, "other");
    cr_assert_eq(msg.seqs[1].ndocs, 1u);
    cr_assert(bson_equal(&msg.body, body));
    mf_wire_msg_destroy(&msg);
    free(b.p);
    bson_destroy(body);
    bson_destroy(d);
}

Test(wire, duplicate_sequence_identifier_is_rejected)
{
    buf_t b = {0};
    bson_t *body = BCON_NEW("insert", "c");
    mf_msg_t msg;
    mf_error_t err = {0};

    begin(&b, MF_OP_MSG);
    put_i32(&b, 0);
    put_u8(&b, 0);
    put_doc(&b, body);
    for (int i = 0; i < 2; i++) {
        put_u8(&b, 1);
        put_i32(&b, 4 + 10);
        put(&b, "documents", 10);
    }
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_Location40431);
    free(b.p);
    bson_destroy(body);
}

Test(wire, truncation_at_every_byte_offset_fails_cleanly)
{
    buf_t b = {0};
    mf_msg_t msg;
    mf_error_t err = {0};

    build_insert(&b, 3);
    for (size_t k = 0; k < b.n; k++) {
        uint8_t *c;
        /* As received: header length disagrees with the bytes. */
        cr_assert_eq(parse_copy(b.p, k, &msg, &err, &c), -1, "prefix %zu parsed", k);
        cr_assert_neq(err.code, 0);
        free(c);
        /* Header length patched to the prefix, so the body parser sees it. */
        if (k >= 16) {
            uint8_t *t = malloc(k);
            memcpy(t, b.p, k);
            t[0] = (uint8_t)k;
            t[1] = (uint8_t)(k >> 8);
            t[2] = t[3] = 0;
            int rc = mf_wire_parse(t, k, &msg, &err);
            free(t);
            if (rc == 0) {
                mf_wire_msg_destroy(&msg);
                /* Only the prefix ending right after the body is a whole message. */
                cr_assert_eq(k, 21 + (size_t)b.p[21], "patched prefix %zu parsed", k);
            }
        }
    }
    free(b.p);
}

Test(wire, corrupting_any_byte_never_crashes)
{
    buf_t b = {0};
    mf_msg_t msg;
    mf_error_t err = {0};
    const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x05, 0x03};

    build_insert(&b, 2);
    for (size_t k = 0; k < b.n; k++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            uint8_t *c = malloc(b.n);
            memcpy(c, b.p, b.n);
            c[k] = vals[v];
            if (mf_wire_parse(c, b.n, &msg, &err) == 0)
                mf_wire_msg_destroy(&msg);
            free(c);
        }
    }
    free(b.p);
}

Test(wire, unknown_section_kind_is_rejected)
{
    buf_t b = {0};
    bson_t *body = BCON_NEW("ping", BCON_INT32(1));
    mf_msg_t msg;
    mf_error_t err = {0};

    begin(&b, MF_OP_MSG);
    put_i32(&b, 0);
    put_u8(&b, 2);
    put_doc(&b, body);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_Location40432);
    free(b.p);
    bson_destroy(body);
}

Test(wire, missing_or_repeated_body_is_rejected)
{
    buf_t b = {0};
    bson_t *body = BCON_NEW("ping", BCON_INT32(1));
    mf_msg_t msg;
    mf_error_t err = {0};

    begin(&b, MF_OP_MSG);
    put_i32(&b, 0);
    put_u8(&b, 1);
    put_i32(&b, 4 + 2);
    put(&b, "x", 2);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_Location40587);
    cr_assert(strstr(err.msg, "body") != NULL, "%s", err.msg);

    begin(&b, MF_OP_MSG);
    put_i32(&b, 0);
    put_u8(&b, 0);
    put_doc(&b, body);
    put_u8(&b, 0);
    put_doc(&b, body);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_Location40430);
    cr_assert(strstr(err.msg, "Multiple body") != NULL, "%s", err.msg);
    free(b.p);
    bson_destroy(body);
}

Test(wire, a_field_both_in_the_body_and_a_sequence_is_40433)
{
    buf_t b = {0};
    bson_t *body = BCON_NEW("insert", "c", "documents", "[", "{", "a", BCON_INT32(1), "}", "]");
    bson_t *doc = BCON_NEW("a", BCON_INT32(2));
    mf_msg_t msg;
    mf_error_t err = {0};

    begin(&b, MF_OP_MSG);
    put_i32(&b, 0);
    put_u8(&b, 0);
    put_doc(&b, body);
    put_u8(&b, 1);
    put_i32(&b, (int32_t)(4 + 10 + doc->len));
    put(&b, "documents", 10);
    put_doc(&b, doc);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_Location40433);
    cr_assert_str_eq(err.msg, "Duplicate field between body and document sequence documents");
    free(b.p);
    bson_destroy(body);
    bson_destroy(doc);
}

Test(wire, unknown_required_flag_bits_are_rejected_optional_ones_ignored)
{
    bson_t *body = BCON_NEW("ping", BCON_INT32(1));
    mf_msg_t msg;
    mf_error_t err = {0};
    size_t len;
    uint8_t *m;

    for (int bit = 2; bit < 16; bit++) {
        m = mf_wire_build_msg(1, 0, 1u << bit, body, &len);
        cr_assert_eq(mf_wire_parse(m, len, &msg, &err), -1, "bit %d accepted", bit);
        cr_assert_eq(err.code, MF_E_ProtocolError);
        free(m);
    }
    m = mf_wire_build_msg(1, 0, MF_MSG_EXHAUST_ALLOWED | (1u << 20) | MF_MSG_MORE_TO_COME, body, &len);
    cr_assert_eq(mf_wire_parse(m, len, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.flags, MF_MSG_EXHAUST_ALLOWED | (1u << 20) | MF_MSG_MORE_TO_COME);
    mf_wire_msg_destroy(&msg);
    free(m);
    bson_destroy(body);
}

Test(wire, malformed_bson_is_invalid_bson)
{
    buf_t b = {0};
    mf_msg_t msg;
    mf_error_t err = {0};
    /* {a: <type 0x42>} */
    const uint8_t bad_type[] = {9, 0, 0, 0, 0x42, 'a', 0, 0, 0};
    /* {a: "x"} with a string length that overruns. */
    const uint8_t bad_str[] = {14, 0, 0, 0, 0x02, 'a', 0, 50, 0, 0, 0, 'x', 0, 0};
    /* Document length disagrees with its terminator. */
    const uint8_t bad_term[] = {6, 0, 0, 0, 0, 1};
    /* {"\xab": 1}: a field name that is not UTF-8. */
    const uint8_t bad_key[] = {12, 0, 0, 0, 0x10, 0xab, 0, 1, 0, 0, 0, 0};
    /* {c: Code("f", {"\xff": 1})}: the same inside a code-with-scope's scope (libbson's own check misses it). */
    const uint8_t bad_scope_key[] = {30, 0, 0, 0, 0x0F, 'c', 0, 22, 0, 0, 0, 2, 0, 0, 0, 'f', 0,
                                     12, 0, 0, 0, 0x10, 0xff, 0, 1, 0, 0, 0, 0, 0};

    const uint8_t *cases[] = {bad_type, bad_str, bad_term, bad_key, bad_scope_key};
    size_t sizes[] = {sizeof bad_type, sizeof bad_str, sizeof bad_term, sizeof bad_key, sizeof bad_scope_key};
    for (int i = 0; i < 5; i++) {
        begin(&b, MF_OP_MSG);
        put_i32(&b, 0);
        put_u8(&b, 0);
        put(&b, cases[i], sizes[i]);
        finish(&b);
        cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), -1, "case %d", i);
        cr_assert_eq(err.code, MF_E_InvalidBSON, "case %d: code %d (%s)", i, err.code, err.msg);
    }
    /* The control: the same code-with-scope with a UTF-8 field name ("é") is accepted. */
    uint8_t good_scope_key[sizeof bad_scope_key + 1];
    memcpy(good_scope_key, bad_scope_key, 22);
    good_scope_key[22] = 0xc3;
    good_scope_key[23] = 0xa9;
    memcpy(good_scope_key + 24, bad_scope_key + 23, sizeof bad_scope_key - 23);
    good_scope_key[0] = 31;  /* outer length */
    good_scope_key[7] = 23;  /* code-with-scope length */
    good_scope_key[17] = 13; /* scope length */
    begin(&b, MF_OP_MSG);
    put_i32(&b, 0);
    put_u8(&b, 0);
    put(&b, good_scope_key, sizeof good_scope_key);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), 0, "a UTF-8 field name in a scope: %s", err.msg);
    mf_wire_msg_destroy(&msg);
    free(b.p);
}

Test(wire, oversize_document_is_bson_object_too_large)
{
    size_t lim = 16 * 1024 * 1024 + 16 * 1024;
    mf_msg_t msg;
    mf_error_t err = {0};

    for (int over = 0; over <= 1; over++) {
        size_t dl = lim + (size_t)over;
        size_t strl = dl - 4 - 1 - 2 - 4 - 1; /* doclen, type, "a\0", strlen, terminator */
        bson_t *body;
        bson_t sub;
        buf_t b = {0};
        uint8_t *doc = calloc(1, dl);

        (void)sub;
        doc[0] = (uint8_t)dl;
        doc[1] = (uint8_t)(dl >> 8);
        doc[2] = (uint8_t)(dl >> 16);
        doc[3] = (uint8_t)(dl >> 24);
        doc[4] = 0x02;
        doc[5] = 'a';
        doc[7] = (uint8_t)strl;
        doc[8] = (uint8_t)(strl >> 8);
        doc[9] = (uint8_t)(strl >> 16);
        doc[10] = (uint8_t)(strl >> 24);
        memset(doc + 11, 'x', strl - 1);
        body = NULL;
        begin(&b, MF_OP_MSG);
        put_i32(&b, 0);
        put_u8(&b, 0);
        put(&b, doc, dl);
        finish(&b);
        int rc = mf_wire_parse(b.p, b.n, &msg, &err);
        if (over) {
            cr_assert_eq(rc, -1);
            cr_assert_eq(err.code, MF_E_BSONObjectTooLarge, "code %d (%s)", err.code, err.msg);
        } else {
            cr_assert_eq(rc, 0, "%s", err.msg);
            mf_wire_msg_destroy(&msg);
        }
        (void)body;
        free(doc);
        free(b.p);
    }
}

/* A document {a: {a: {... depth levels ...}}} assembled byte by byte. */
static void
put_nested(buf_t *b, int depth)
{
    /* Each level: len(4) 0x03 'a' 0 <inner> 0; innermost is {}. */
    size_t inner = 5;
    size_t *lens = malloc(sizeof(size_t) * (size_t)depth);
    for (int i = depth - 1; i >= 0; i--) {
        lens[i] = inner;
        inner = 4 + 3 + inner + 1;
    }
    /* Top level has length `inner`. */
    put_i32(b, (int32_t)inner);
    for (int i = 0; i < depth; i++) {
        put_u8(b, 0x03);
        put(b, "a", 2);
        if (i < depth - 1)
            put_i32(b, (int32_t)lens[i]);
    }
    put_i32(b, 5);
    put_u8(b, 0);
    for (int i = 0; i < depth; i++)
        put_u8(b, 0);
    free(lens);
}

Test(wire, deep_nesting_is_refused_without_recursion)
{
    mf_msg_t msg;
    mf_error_t err = {0};
    int depths[] = {150, 200, 201, 100000};
    int expect_ok[] = {1, 1, 0, 0};

    for (int i = 0; i < 4; i++) {
        buf_t b = {0};
        begin(&b, MF_OP_MSG);
        put_i32(&b, 0);
        put_u8(&b, 0);
        put_nested(&b, depths[i]);
        finish(&b);
        int rc = mf_wire_parse(b.p, b.n, &msg, &err);
        if (expect_ok[i]) {
            cr_assert_eq(rc, 0, "depth %d: %s", depths[i], err.msg);
            mf_wire_msg_destroy(&msg);
        } else {
            cr_assert_eq(rc, -1, "depth %d accepted", depths[i]);
            cr_assert_eq(err.code, MF_E_Overflow, "depth %d: code %d (%s)", depths[i], err.code, err.msg);
        }
        free(b.p);
    }
}

Test(wire, op_query_is_parsed_with_and_without_field_selector)
{
    buf_t b = {0};
    bson_t *q = BCON_NEW("isMaster", BCON_INT32(1));
    bson_t *f = BCON_NEW("x", BCON_INT32(1));
    mf_msg_t msg;
    mf_error_t err = {0};

    begin(&b, MF_OP_QUERY);
    put_i32(&b, 4);
    put(&b, "admin.$cmd", 11);
    put_i32(&b, 0);
    put_i32(&b, -1);
    put_doc(&b, q);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), 0, "%s", err.msg);
    cr_assert_eq(msg.flags, 4u);
    cr_assert_str_eq(msg.full_collection_name, "admin.$cmd");
    cr_assert_eq(msg.number_to_skip, 0);
    cr_assert_eq(msg.number_to_return, -1);
    cr_assert(bson_equal(&msg.body, q));
    cr_assert(!msg.has_return_fields);
    mf_wire_msg_destroy(&msg);

    put_doc(&b, f);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), 0, "%s", err.msg);
    cr_assert(msg.has_return_fields);
    cr_assert(bson_equal(&msg.return_fields, f));
    mf_wire_msg_destroy(&msg);

    /* Trailing garbage after the selector. */
    put_u8(&b, 7);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), -1);

    /* Every truncation fails cleanly. */
    b.n -= 1;
    for (size_t k = 16; k < b.n; k++) {
        uint8_t *t = malloc(k);
        memcpy(t, b.p, k);
        t[0] = (uint8_t)k;
        t[1] = (uint8_t)(k >> 8);
        t[2] = t[3] = 0;
        int rc = mf_wire_parse(t, k, &msg, &err);
        /* The prefix ending exactly after the query document is a valid message. */
        if (rc == 0) {
            cr_assert_eq(k, 16 + 4 + 11 + 8 + q->len, "prefix %zu parsed", k);
            mf_wire_msg_destroy(&msg);
        }
        free(t);
    }
    free(b.p);
    bson_destroy(q);
    bson_destroy(f);
}

Test(wire, op_query_namespace_must_be_terminated)
{
    buf_t b = {0};
    mf_msg_t msg;
    mf_error_t err = {0};

    begin(&b, MF_OP_QUERY);
    put_i32(&b, 0);
    put(&b, "admin.$cmd", 10);
    finish(&b);
    cr_assert_eq(mf_wire_parse(b.p, b.n, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_ProtocolError);
    free(b.p);
}

Test(wire, unsupported_opcode_and_bad_length_are_protocol_errors)
{
    bson_t *body = BCON_NEW("ping", BCON_INT32(1));
    size_t len;
    uint8_t *m = mf_wire_build_msg(1, 0, 0, body, &len);
    mf_msg_t msg;
    mf_error_t err = {0};

    m[12] = 0xD4; /* 2004 -> OP_QUERY layout won't match; use an unknown code */
    m[13] = 0x0F;
    cr_assert_eq(mf_wire_parse(m, len, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_ProtocolError);
    m[12] = 0xDD;
    m[13] = 0x07;
    cr_assert_eq(mf_wire_parse(m, len - 1, &msg, &err), -1);
    cr_assert_eq(err.code, MF_E_ProtocolError);
    free(m);
    bson_destroy(body);
}

Test(wire, op_reply_builder_lays_out_fields)
{
    bson_t *doc = BCON_NEW("ok", BCON_DOUBLE(1.0));
    size_t len;
    uint8_t *m = mf_wire_build_reply(3, 42, MF_REPLY_QUERY_FAILURE, doc, &len);
    mf_msg_header_t hdr;
    bson_t got;

    cr_assert_eq(len, 36 + doc->len);
    mf_wire_read_header(m, &hdr);
    cr_assert_eq(hdr.length, (int32_t)len);
    cr_assert_eq(hdr.request_id, 3);
    cr_assert_eq(hdr.response_to, 42);
    cr_assert_eq(hdr.opcode, MF_OP_REPLY);
    cr_assert_eq(m[16], 2, "responseFlags %u, want QueryFailure (2)", m[16]);
    cr_assert_eq(m[32], 1); /* numberReturned */
    cr_assert(bson_init_static(&got, m + 36, doc->len));
    cr_assert(bson_equal(&got, doc));
    free(m);
    bson_destroy(doc);
}

Test(wire, destroy_of_zeroed_or_failed_message_is_harmless)
{
    mf_msg_t msg;
    mf_error_t err = {0};
    uint8_t junk[20] = {20, 0, 0, 0};

    memset(&msg, 0, sizeof msg);
    mf_wire_msg_destroy(&msg);
    junk[12] = 0xDD;
    junk[13] = 0x07;
    cr_assert_eq(mf_wire_parse(junk, sizeof junk, &msg, &err), -1);
    mf_wire_msg_destroy(&msg);
}

/* ---- mf_wire_peek_command: the I/O thread's lane choice ---- */

/* An OP_MSG with an optional kind-1 section before the body. */
static buf_t
peek_msg(const char *json, bool seq_first)
{
    buf_t b = {0};
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)json, -1, &berr);
    cr_assert_not_null(doc);
    put_i32(&b, 0);
    put_i32(&b, 7);
    put_i32(&b, 0);
    put_i32(&b, MF_OP_MSG);
    put_i32(&b, 0);
    if (seq_first) {
        bson_t *d = BCON_NEW("x", BCON_INT32(1));
        put_u8(&b, 1);
        put_i32(&b, (int32_t)(4 + 10 + d->len));
        put(&b, "documents", 10);
        put(&b, bson_get_data(d), d->len);
        bson_destroy(d);
    }
    put_u8(&b, 0);
    put(&b, bson_get_data(doc), doc->len);
    bson_destroy(doc);
    uint32_t n = (uint32_t)b.n;
    uint8_t x[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    memcpy(b.p, x, 4);
    return b;
}

/* Peeks at the first n bytes of b as a message of its own (length field patched), in an exact-size copy. */
static bool
peek_truncated(const buf_t *b, size_t n, char *name, size_t cap)
{
    uint8_t *m = malloc(n ? n : 1);
    memcpy(m, b->p, n);
    if (n >= 4) {
        uint8_t x[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
        memcpy(m, x, 4);
    }
    bool ok = mf_wire_peek_command(m, n, name, cap);
    free(m);
    return ok;
}

Test(wire_peek, op_msg_names)
{
    char name[32];
    buf_t b = peek_msg("{\"hello\": 1, \"$db\": \"admin\"}", false);
    cr_assert(mf_wire_peek_command(b.p, b.n, name, sizeof(name)));
    cr_assert_str_eq(name, "hello");
    free(b.p);
    b = peek_msg("{\"insert\": \"c\", \"$db\": \"test\"}", true);
    cr_assert(mf_wire_peek_command(b.p, b.n, name, sizeof(name)), "kind-1 section before the body is skipped");
    cr_assert_str_eq(name, "insert");
    /* Too small a buffer for the name: no answer rather than a truncated one. */
    cr_assert_not(mf_wire_peek_command(b.p, b.n, name, 4));
    /* Every truncation is refused without reading past the end. */
    for (size_t n = 0; n < b.n; n++) {
        cr_assert_not(mf_wire_peek_command(b.p, n, name, sizeof(name)), "truncated to %zu", n);
        (void)peek_truncated(&b, n, name, sizeof(name)); /* may answer or not; must not read past n */
    }
    free(b.p);
    b = peek_msg("{}", false);
    cr_assert_not(mf_wire_peek_command(b.p, b.n, name, sizeof(name)), "empty body has no command");
    free(b.p);
}

Test(wire_peek, op_query_names_and_wrapped)
{
    const char *cases[][2] = {{"{\"isMaster\": 1}", "isMaster"},
                              {"{\"$query\": {\"ping\": 1}, \"$readPreference\": {}}", "ping"},
                              {"{\"query\": {\"find\": \"c\"}}", "find"}};
    for (size_t k = 0; k < 3; k++) {
        buf_t b = {0};
        bson_error_t berr;
        bson_t *doc = bson_new_from_json((const uint8_t *)cases[k][0], -1, &berr);
        char name[32];
        put_i32(&b, 0);
        put_i32(&b, 9);
        put_i32(&b, 0);
        put_i32(&b, MF_OP_QUERY);
        put_i32(&b, 0);
        put(&b, "admin.$cmd", 11);
        put_i32(&b, 0);
        put_i32(&b, -1);
        put(&b, bson_get_data(doc), doc->len);
        bson_destroy(doc);
        uint32_t n = (uint32_t)b.n;
        uint8_t x[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
        memcpy(b.p, x, 4);
        cr_assert(mf_wire_peek_command(b.p, b.n, name, sizeof(name)), "%s", cases[k][0]);
        cr_assert_str_eq(name, cases[k][1]);
        for (size_t t = 0; t < b.n; t++) {
            cr_assert_not(mf_wire_peek_command(b.p, t, name, sizeof(name)));
            (void)peek_truncated(&b, t, name, sizeof(name));
        }
        free(b.p);
    }
    uint8_t junk[40];
    memset(junk, 0xff, sizeof(junk));
    char name[8];
    cr_assert_not(mf_wire_peek_command(junk, sizeof(junk), name, sizeof(name)));
}

/* ---- OP_COMPRESSED (wire_compress.c) ---- */

static const mf_compressor_list_t every_compressor = {.ids = {0, 1, 2, 3}, .n = 4};

/* A ping OP_MSG with a padded comment, so there is something to compress. */
static uint8_t *
ping_msg(size_t *len)
{
    bson_t body = BSON_INITIALIZER;
    char pad[3000];
    memset(pad, 'p', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    BSON_APPEND_INT32(&body, "ping", 1);
    BSON_APPEND_UTF8(&body, "comment", pad);
    BSON_APPEND_UTF8(&body, "$db", "admin");
    uint8_t *m = mf_wire_build_msg(77, 5, 0, &body, len);
    bson_destroy(&body);
    return m;
}

Test(wire, every_compressor_round_trips_a_message)
{
    size_t len, n, back_len;
    uint8_t *msg = ping_msg(&len);
    for (int id = 0; id < MF_COMPRESSOR_COUNT; id++) {
        uint8_t *env = mf_wire_compress(msg, len, id, &n), *back;
        int got_id;
        mf_error_t err;
        cr_assert_not_null(env, "compressor %d", id);
        cr_assert_eq(env[24], id);
        if (id != MF_COMPRESSOR_NOOP)
            cr_assert_lt(n, len, "compressor %d: %zu bytes from %zu", id, n, len);
        cr_assert_eq(mf_wire_decompress(env, n, &every_compressor, NULL, &back, &back_len, &got_id, &err), 0,
                     "compressor %d: %s", id, err.msg);
        cr_assert_eq(got_id, id);
        cr_assert_eq(back_len, len, "compressor %d: %zu bytes back, %zu sent", id, back_len, len);
        cr_assert_eq(memcmp(back, msg, len), 0, "compressor %d: bytes differ", id);
        free(back);
        free(env);
    }
    free(msg);
}

/* Unwraps env (after setting uncompressedSize and compressor when >= 0) and expects code. */
static void
expect_refused(uint8_t *env, size_t n, int32_t usize, const mf_compressor_list_t *configured,
               const mf_compressor_list_t *negotiated, int code, const char *what)
{
    uint8_t *out = (uint8_t *)"untouched";
    size_t out_len = 1;
    int id;
    mf_error_t err;
    if (usize != INT32_MIN) {
        env[20] = (uint8_t)usize;
        env[21] = (uint8_t)(usize >> 8);
        env[22] = (uint8_t)(usize >> 16);
        env[23] = (uint8_t)(usize >> 24);
    }
    cr_assert_eq(mf_wire_decompress(env, n, configured, negotiated, &out, &out_len, &id, &err), -1, "%s", what);
    cr_assert_eq(err.code, code, "%s: code %d (%s)", what, err.code, err.msg);
    cr_assert_null(out, "%s", what);
}

Test(wire, compressed_envelopes_mongod_refuses_are_refused)
{
    size_t len, n;
    uint8_t *msg = ping_msg(&len);
    mf_compressor_list_t zlib_only = {.ids = {MF_COMPRESSOR_ZLIB}, .n = 1};
    mf_compressor_list_t none = {.n = 0};
    uint8_t *z = mf_wire_compress(msg, len, MF_COMPRESSOR_ZLIB, &n);
    int32_t real = (int32_t)(len - 16);

    expect_refused(z, n, INT32_MIN, &none, NULL, MF_E_InternalError, "not configured");
    expect_refused(z, n, INT32_MIN, &every_compressor, &none, MF_E_BadValue, "not negotiated");
    expect_refused(z, n, -1, &zlib_only, &zlib_only, MF_E_BadValue, "negative size");
    expect_refused(z, n, MF_MAX_MESSAGE_SIZE - 15, &zlib_only, NULL, MF_E_BadValue, "over the message size");
    expect_refused(z, n, real + 1, &zlib_only, NULL, MF_E_BadValue, "size larger than the data");
    expect_refused(z, n, real - 1, &zlib_only, NULL, MF_E_BadValue, "size smaller than the data");
    expect_refused(z, n, (int32_t)(n * 2000), &zlib_only, NULL, MF_E_BadValue, "past deflate's ratio");
    expect_refused(z, 20, INT32_MIN, &zlib_only, NULL, MF_E_BadValue, "header cut short");
    z[24] = 200;
    expect_refused(z, n, real, &every_compressor, NULL, MF_E_InternalError, "unknown id");
    free(z);
    for (int id = 1; id < MF_COMPRESSOR_COUNT; id++) {
        /* Every byte of the compressed data flipped in turn: an error or the right size, never an overrun. */
        uint8_t *env = mf_wire_compress(msg, len, id, &n);
        for (size_t i = 25; i < n; i++) {
            uint8_t *out;
            size_t out_len;
            int got;
            mf_error_t err;
            env[i] ^= 0x5a;
            if (mf_wire_decompress(env, n, &every_compressor, NULL, &out, &out_len, &got, &err) == 0) {
                cr_assert_eq(out_len, len);
                free(out);
            }
            env[i] ^= 0x5a;
        }
        free(env);
    }
    free(msg);
}

Test(wire, compressor_lists_parse_as_mongod_reads_them)
{
    mf_compressor_list_t l;
    mf_error_t err;
    cr_assert_eq(mf_compressor_list_parse("snappy,zstd,zlib", &l, &err), 0);
    cr_assert_eq(l.n, 3);
    cr_assert(l.ids[0] == MF_COMPRESSOR_SNAPPY && l.ids[1] == MF_COMPRESSOR_ZSTD && l.ids[2] == MF_COMPRESSOR_ZLIB);
    cr_assert_eq(mf_compressor_list_parse("zlib, noop,zlib", &l, &err), 0);
    cr_assert(l.n == 2 && l.ids[0] == MF_COMPRESSOR_ZLIB && l.ids[1] == MF_COMPRESSOR_NOOP);
    cr_assert_eq(mf_compressor_list_parse("disabled", &l, &err), 0);
    cr_assert_eq(l.n, 0);
    cr_assert_eq(mf_compressor_list_parse("zlib,lz4", &l, &err), -1);
    cr_assert_eq(err.code, MF_E_BadValue);
    cr_assert_str_eq(err.msg, "Invalid network message compressor specified in configuration: lz4");
}
