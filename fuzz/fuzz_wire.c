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
 * OP_COMPRESSED (2012) inputs go through mf_wire_decompress (every
 * compressor configured, none required to be negotiated) and what they carry
 * through the checks below; the repaired copy of one has its
 * uncompressedSize set to what follows the envelope's header, and a third
 * copy treats those bytes as the uncompressed body and wraps them with
 * mf_wire_compress using the envelope's compressor (id mod 4), so snappy,
 * zlib and zstd all reach the inner parsers without the fuzzer having to
 * produce valid compressed data. An unwrapped message must have the
 * announced length, the envelope's requestID and responseTo and its
 * originalOpcode, and must survive a round trip through every compressor.
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

static void one(const uint8_t *buf, size_t len, int depth);

/* Every compressor, as a server configured with all of them offers. */
static const mf_compressor_list_t all_compressors = {.ids = {0, 1, 2, 3}, .n = 4};

/* Unwraps the OP_COMPRESSED message buf/len, checks what came out, and feeds it on. */
static void
unwrap(const uint8_t *buf, size_t len, int depth)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    int id = -1;
    mf_error_t err;

    mf_err_clear(&err);
    if (mf_wire_decompress(buf, len, &all_compressors, NULL, &out, &out_len, &id, &err) != 0) {
        FUZZ_CHECK(err.code == MF_E_BadValue || err.code == MF_E_InternalError, "decompress failed with code %d",
                   err.code);
        FUZZ_CHECK(out == NULL, "failed decompress returned a buffer");
        return;
    }
    FUZZ_CHECK(len >= 25 && id == buf[24], "compressor %d, envelope says %d", id, len >= 25 ? buf[24] : -1);
    FUZZ_CHECK(out_len == (size_t)(int32_t)fuzz_get_u32(buf + 20) + 16, "unwrapped %zu bytes, announced %u + 16", out_len,
               fuzz_get_u32(buf + 20));
    FUZZ_CHECK(fuzz_get_u32(out) == out_len, "unwrapped header length %u, message %zu", fuzz_get_u32(out), out_len);
    FUZZ_CHECK(memcmp(out + 4, buf + 4, 8) == 0, "requestID / responseTo not kept");
    FUZZ_CHECK(memcmp(out + 12, buf + 16, 4) == 0, "opcode is not originalOpcode");
    for (int c = 0; c < MF_COMPRESSOR_COUNT && out_len <= (1u << 20); c++) { /* big ones once, not four times more */
        size_t n = 0, back_len = 0;
        uint8_t *wrapped = mf_wire_compress(out, out_len, c, &n), *back = NULL;
        if (wrapped == NULL)
            continue;
        FUZZ_CHECK(mf_wire_decompress(wrapped, n, &all_compressors, NULL, &back, &back_len, &id, &err) == 0,
                   "compressor %d: its own envelope does not unwrap: %s", c, err.msg);
        FUZZ_CHECK(back_len == out_len && memcmp(back, out, out_len) == 0, "compressor %d: round trip differs", c);
        free(back);
        free(wrapped);
    }
    one(out, out_len, depth + 1);
    free(out);
}

static void
one(const uint8_t *buf, size_t len, int depth)
{
    mf_msg_t msg;
    mf_error_t err;
    char peeked[64], want[64];
    bool peek_ok;

    if (len >= 16 && fuzz_get_u32(buf + 12) == MF_OP_COMPRESSED && depth < 2) {
        unwrap(buf, len, depth);
        return;
    }
    peek_ok = mf_wire_peek_command(buf, len, peeked, sizeof(peeked));

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

    one(data, size, 0);
    if (size < 16 || size > MF_MAX_MESSAGE_SIZE)
        return 0;
    fixed = malloc(size);
    memcpy(fixed, data, size);
    fuzz_put_u32(fixed, (uint32_t)size);
    if (size >= 25 && fuzz_get_u32(fixed + 12) == MF_OP_MSG && (fuzz_get_u32(fixed + 16) & MF_MSG_CHECKSUM_PRESENT))
        fuzz_put_u32(fixed + size - 4, mf_crc32c(fixed, size - 4));
    if (size >= 25 && fuzz_get_u32(fixed + 12) == MF_OP_COMPRESSED) {
        /* The rest as the body itself: a valid envelope made with the envelope's compressor. */
        size_t n = 0;
        uint8_t *plain = malloc(size - 9), *wrapped;
        memcpy(plain, fixed, 16);
        memcpy(plain + 12, fixed + 16, 4); /* originalOpcode */
        memcpy(plain + 16, fixed + 25, size - 25);
        fuzz_put_u32(plain, (uint32_t)(size - 9));
        wrapped = mf_wire_compress(plain, size - 9, fixed[24] % MF_COMPRESSOR_COUNT, &n);
        if (wrapped != NULL)
            one(wrapped, n, 0);
        free(wrapped);
        free(plain);
        fuzz_put_u32(fixed + 20, (uint32_t)(size - 25)); /* uncompressedSize: right for noop */
    }
    one(fixed, size, 0);
    free(fixed);
    return 0;
}
