/*
 * fuzz_wire.c: the wire message framer and parser (src/net/wire.c).
 *
 * Feeds: the input as one whole message (header, OP_MSG or OP_QUERY body),
 * twice: as it is, and repaired, with the header's messageLength set to the
 * input's size and, when the OP_MSG checksumPresent flag is set, a correct
 * CRC-32C in the last four bytes, so the fuzzer reaches the section and
 * document parsers without guessing lengths and checksums. Each goes through
 * mf_wire_peek_command (what the I/O thread does to pick a lane) and
 * mf_wire_parse (what a worker does).
 *
 * Checks: no crash, leak or undefined behaviour; on success every view the
 * parsed message holds (body, return fields, each kind-1 identifier and
 * document) lies inside the message and is walked to its end; the command
 * name peeked without parsing equals the parsed body's first key; an OP_MSG
 * reply built from the parsed body (mf_wire_build_msg, with and without a
 * checksum) parses back to the same bytes.
 */
#include "fuzz_common.h"

#include <stdio.h>

static bool
inside(const void *p, size_t n, const uint8_t *buf, size_t len)
{
    const uint8_t *q = p;
    return q >= buf && n <= len && q - buf <= (ptrdiff_t)(len - n);
}

/* The name mf_wire_peek_command should find: the body's first key (inside $query/query for OP_QUERY). */
static bool
expected_name(const mf_msg_t *msg, char *name, size_t cap)
{
    bson_iter_t it, in;
    const char *k;

    if (!bson_iter_init(&it, &msg->body) || !bson_iter_next(&it))
        return false;
    k = bson_iter_key(&it);
    if (msg->hdr.opcode == MF_OP_QUERY && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        (strcmp(k, "$query") == 0 || strcmp(k, "query") == 0)) {
        if (!bson_iter_recurse(&it, &in) || !bson_iter_next(&in))
            return false;
        k = bson_iter_key(&in);
    }
    if (strlen(k) == 0 || strlen(k) >= cap)
        return false;
    memcpy(name, k, strlen(k) + 1);
    return true;
}

static void
check_roundtrip(const bson_t *body, uint32_t flags)
{
    size_t n = 0;
    uint8_t *out = mf_wire_build_msg(7, 9, flags, body, &n);
    mf_msg_t back;
    mf_error_t err;

    mf_err_clear(&err);
    FUZZ_CHECK(mf_wire_parse(out, n, &back, &err) == 0, "reply built from a parsed body does not parse: %s", err.msg);
    FUZZ_CHECK(back.body.len == body->len && memcmp(bson_get_data(&back.body), bson_get_data(body), body->len) == 0,
               "reply body differs from the body it was built from");
    FUZZ_CHECK(back.hdr.request_id == 7 && back.hdr.response_to == 9 && back.flags == flags, "reply header garbled");
    mf_wire_msg_destroy(&back);
    free(out);
}

static void
one(const uint8_t *buf, size_t len)
{
    mf_msg_t msg;
    mf_error_t err;
    char peeked[64], want[64];
    bool peek_ok = mf_wire_peek_command(buf, len, peeked, sizeof(peeked));

    mf_err_clear(&err);
    if (mf_wire_parse(buf, len, &msg, &err) != 0) {
        FUZZ_CHECK(err.code != 0, "parse failed without an error code");
        FUZZ_CHECK(msg.nseqs == 0, "failed parse left document sequences behind");
        mf_wire_msg_destroy(&msg); /* a stray destroy must be harmless */
        return;
    }
    FUZZ_CHECK(msg.hdr.opcode == MF_OP_MSG || msg.hdr.opcode == MF_OP_QUERY, "parsed opcode %d", msg.hdr.opcode);
    FUZZ_CHECK(inside(bson_get_data(&msg.body), msg.body.len, buf, len), "body outside the message");
    fuzz_walk(bson_get_data(&msg.body), msg.body.len, 0);
    if (msg.has_return_fields) {
        FUZZ_CHECK(inside(bson_get_data(&msg.return_fields), msg.return_fields.len, buf, len),
                   "returnFieldsSelector outside the message");
        fuzz_walk(bson_get_data(&msg.return_fields), msg.return_fields.len, 0);
    }
    if (msg.hdr.opcode == MF_OP_QUERY)
        FUZZ_CHECK(inside(msg.full_collection_name, strlen(msg.full_collection_name) + 1, buf, len),
                   "namespace outside the message");
    FUZZ_CHECK(msg.nseqs <= MF_MAX_SECTIONS, "%zu sequences", msg.nseqs);
    for (size_t i = 0; i < msg.nseqs; i++) {
        const mf_docseq_t *s = &msg.seqs[i];
        FUZZ_CHECK(inside(s->identifier, strlen(s->identifier) + 1, buf, len), "sequence identifier outside");
        for (size_t j = 0; j < s->ndocs; j++) {
            FUZZ_CHECK(inside(bson_get_data(&s->docs[j]), s->docs[j].len, buf, len), "sequence document outside");
            fuzz_walk(bson_get_data(&s->docs[j]), s->docs[j].len, 0);
        }
    }
    /* The lane choice must agree with the full parse. */
    if (expected_name(&msg, want, sizeof(want)))
        FUZZ_CHECK(peek_ok && strcmp(peeked, want) == 0, "peeked '%s' (ok %d), body's first key '%s'",
                   peek_ok ? peeked : "", peek_ok, want);
    else
        FUZZ_CHECK(!peek_ok, "peeked '%s' but the body has no usable first key", peeked);
    check_roundtrip(&msg.body, 0);
    check_roundtrip(&msg.body, MF_MSG_CHECKSUM_PRESENT);
    mf_wire_msg_destroy(&msg);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *fixed;

    one(data, size);
    if (size < 16 || size > MF_MAX_MESSAGE_SIZE)
        return 0;
    fixed = malloc(size);
    memcpy(fixed, data, size);
    fuzz_put_u32(fixed, (uint32_t)size);
    if (size >= 25 && fuzz_get_u32(fixed + 12) == MF_OP_MSG && (fuzz_get_u32(fixed + 16) & MF_MSG_CHECKSUM_PRESENT))
        fuzz_put_u32(fixed + size - 4, mf_crc32c(fixed, size - 4));
    one(fixed, size);
    free(fixed);
    return 0;
}
