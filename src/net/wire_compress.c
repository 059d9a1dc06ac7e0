/*
 * wire_compress.c: OP_COMPRESSED (opcode 2012), the wire protocol's
 * compressed envelope, unwrapped and built with the compression libraries
 * themselves (libsnappy's C API, zlib's uncompress / compress2, libzstd's
 * one-shot calls): no codec is written here.
 *
 * Layout after the 16-byte message header (all little-endian):
 *
 *   offset  size  field
 *   16      4     originalOpcode     the wrapped message's opcode
 *   20      4     uncompressedSize   the wrapped message's length without its header
 *   24      1     compressorId       common/compressor.h (0 noop, 1 snappy, 2 zlib, 3 zstd)
 *   25      ...   the wrapped message's body, compressed
 *
 * Unwrapping gives the wrapped message back whole: a header with
 * messageLength uncompressedSize + 16, the envelope's requestID and
 * responseTo, and originalOpcode, then the body. The checks and their
 * order are mongod's MessageCompressorManager::decompressMessage (8.0, and
 * master for the negotiated check): a too-short envelope, an unknown or
 * unconfigured compressor, one this connection did not negotiate, a
 * negative size, a size over maxMessageSizeBytes, a size the compressed
 * data's own header contradicts (snappy's preamble, zstd's frame content
 * size; zlib has no such field, so a size past deflate's largest ratio,
 * 1032:1, is refused before allocating), then the decompression itself
 * into a buffer of exactly uncompressedSize bytes, which must come out
 * full. The output buffer is the only memory written; each library is told
 * its capacity, so corrupt input is an error, never an overrun.
 */
#include "common/alloc.h"
#include "net/wire.h"

#include <endian.h>
#include <snappy-c.h>
#include <sys/types.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

/* deflate's largest expansion: 1032 output bytes per input byte (zlib's FAQ), plus a little for the stream's framing. */
#define ZLIB_MAX_RATIO 1032u
#define ZLIB_SLACK 64u

/* A little-endian int32 at p (any alignment). */
static int32_t
le_i32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return (int32_t)le32toh(v);
}

static void
put_le_i32(uint8_t *p, int32_t v)
{
    uint32_t u = htole32((uint32_t)v);
    memcpy(p, &u, 4);
}

/*
 * The most bytes in's compressed data can decompress to, as its own header
 * says (mongod's getMaxDecompressedSize), or SIZE_MAX when it says nothing.
 */
static size_t
max_decompressed(int id, const uint8_t *in, size_t in_len)
{
    size_t n;
    unsigned long long z;

    switch (id) {
    case MF_COMPRESSOR_NOOP:
        return in_len;
    case MF_COMPRESSOR_SNAPPY:
        return snappy_uncompressed_length((const char *)in, in_len, &n) == SNAPPY_OK ? n : 0;
    case MF_COMPRESSOR_ZLIB:
        return in_len > (SIZE_MAX - ZLIB_SLACK) / ZLIB_MAX_RATIO ? SIZE_MAX : in_len * ZLIB_MAX_RATIO + ZLIB_SLACK;
    default: /* zstd */
        z = ZSTD_getFrameContentSize(in, in_len);
        if (z == ZSTD_CONTENTSIZE_ERROR)
            return 0;
        return z == ZSTD_CONTENTSIZE_UNKNOWN || z > SIZE_MAX ? SIZE_MAX : (size_t)z;
    }
}

/* Decompresses in into out (cap bytes). Returns the bytes written, or -1 (corrupt, or more than cap). */
static ssize_t
decompress_body(int id, const uint8_t *in, size_t in_len, uint8_t *out, size_t cap)
{
    size_t n = cap;
    uLongf zn = (uLongf)cap;

    switch (id) {
    case MF_COMPRESSOR_NOOP:
        if (in_len > cap)
            return -1;
        memcpy(out, in, in_len);
        return (ssize_t)in_len;
    case MF_COMPRESSOR_SNAPPY:
        return snappy_uncompress((const char *)in, in_len, (char *)out, &n) == SNAPPY_OK ? (ssize_t)n : -1;
    case MF_COMPRESSOR_ZLIB:
        return uncompress(out, &zn, in, (uLong)in_len) == Z_OK ? (ssize_t)zn : -1;
    default:
        n = ZSTD_decompress(out, cap, in, in_len);
        return ZSTD_isError(n) ? -1 : (ssize_t)n;
    }
}

int
mf_wire_decompress(const uint8_t *buf, size_t len, const mf_compressor_list_t *configured,
                   const mf_compressor_list_t *negotiated, uint8_t **out, size_t *out_len, int *compressor,
                   mf_error_t *err)
{
    *out = NULL;
    *out_len = 0;
    if (len < MF_WIRE_HEADER_SIZE + MF_COMPRESSED_HEADER_SIZE)
        return mf_err_set(err, MF_E_BadValue, "Invalid compressed message header");
    int32_t opcode = le_i32(buf + 16), usize = le_i32(buf + 20);
    int id = buf[24];
    const uint8_t *in = buf + MF_WIRE_HEADER_SIZE + MF_COMPRESSED_HEADER_SIZE;
    size_t in_len = len - MF_WIRE_HEADER_SIZE - MF_COMPRESSED_HEADER_SIZE;

    *compressor = id;
    if (id >= MF_COMPRESSOR_COUNT || !mf_compressor_list_has(configured, id))
        return mf_err_set(err, MF_E_InternalError, "Compression algorithm specified in message is not available");
    if (negotiated != NULL && !mf_compressor_list_has(negotiated, id))
        return mf_err_set(err, MF_E_BadValue, "Compressor was not negotiated for this connection");
    if (usize < 0)
        return mf_err_set(err, MF_E_BadValue, "Decompressed message would be negative in size");
    if ((size_t)usize + MF_WIRE_HEADER_SIZE > (size_t)MF_MAX_MESSAGE_SIZE)
        return mf_err_set(err, MF_E_BadValue, "Decompressed message would be larger than maximum message size");
    if (max_decompressed(id, in, in_len) < (size_t)usize)
        return mf_err_set(err, MF_E_BadValue, "Uncompressed message size does not match expected size");

    uint8_t *msg = mf_malloc((size_t)usize + MF_WIRE_HEADER_SIZE);
    ssize_t got = decompress_body(id, in, in_len, msg + MF_WIRE_HEADER_SIZE, (size_t)usize);
    if (got < 0) {
        mf_err_set(err, MF_E_BadValue, "Compressed message was invalid or corrupted (%s)", mf_compressor_name(id));
        goto err_free_msg;
    }
    if (got != usize) {
        mf_err_set(err, MF_E_BadValue, "Decompressing message returned less data than expected");
        goto err_free_msg;
    }
    put_le_i32(msg, usize + MF_WIRE_HEADER_SIZE);
    memcpy(msg + 4, buf + 4, 8); /* requestID, responseTo */
    put_le_i32(msg + 12, opcode);
    *out = msg;
    *out_len = (size_t)usize + MF_WIRE_HEADER_SIZE;
    return 0;

err_free_msg:
    free(msg);
    return -1;
}

uint8_t *
mf_wire_compress(const uint8_t *msg, size_t len, int compressor, size_t *out_len)
{
    const uint8_t *body = msg + MF_WIRE_HEADER_SIZE;
    size_t blen = len - MF_WIRE_HEADER_SIZE, bound, n;
    uLongf zn;

    *out_len = 0;
    switch (compressor) {
    case MF_COMPRESSOR_NOOP:
        bound = blen;
        break;
    case MF_COMPRESSOR_SNAPPY:
        bound = snappy_max_compressed_length(blen);
        break;
    case MF_COMPRESSOR_ZLIB:
        bound = compressBound((uLong)blen);
        break;
    case MF_COMPRESSOR_ZSTD:
        bound = ZSTD_compressBound(blen);
        break;
    default:
        return NULL;
    }
    /* As mongod's compressMessage: a reply that might not fit is sent as it is. */
    if (bound > (size_t)MF_MAX_MESSAGE_SIZE - MF_WIRE_HEADER_SIZE - MF_COMPRESSED_HEADER_SIZE)
        return NULL;
    uint8_t *out = mf_malloc(bound + MF_WIRE_HEADER_SIZE + MF_COMPRESSED_HEADER_SIZE);
    uint8_t *dst = out + MF_WIRE_HEADER_SIZE + MF_COMPRESSED_HEADER_SIZE;
    bool ok;
    switch (compressor) {
    case MF_COMPRESSOR_NOOP:
        memcpy(dst, body, blen);
        n = blen;
        ok = true;
        break;
    case MF_COMPRESSOR_SNAPPY:
        n = bound;
        ok = snappy_compress((const char *)body, blen, (char *)dst, &n) == SNAPPY_OK;
        break;
    case MF_COMPRESSOR_ZLIB:
        zn = (uLongf)bound;
        ok = compress2(dst, &zn, body, (uLong)blen, Z_DEFAULT_COMPRESSION) == Z_OK;
        n = (size_t)zn;
        break;
    default:
        n = ZSTD_compress(dst, bound, body, blen, ZSTD_CLEVEL_DEFAULT);
        ok = !ZSTD_isError(n);
        break;
    }
    if (!ok)
        goto err_free_out;
    *out_len = n + MF_WIRE_HEADER_SIZE + MF_COMPRESSED_HEADER_SIZE;
    put_le_i32(out, (int32_t)*out_len);
    memcpy(out + 4, msg + 4, 8); /* requestID, responseTo */
    put_le_i32(out + 12, MF_OP_COMPRESSED);
    memcpy(out + 16, msg + 12, 4); /* originalOpcode */
    put_le_i32(out + 20, (int32_t)blen);
    out[24] = (uint8_t)compressor;
    return out;

err_free_out:
    free(out);
    return NULL;
}
