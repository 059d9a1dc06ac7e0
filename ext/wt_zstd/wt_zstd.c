/*
 * wt_zstd.c: a zstd block compressor for WiredTiger, built as the
 * extension library libmayfly_wt_zstd.so (WiredTiger loads compressors
 * from extension libraries named in wiredtiger_open's "extensions" config,
 * so they are there during recovery, before any table is read).
 *
 * Debian's WiredTiger ships snappy and zlib compressors only. mayfly uses
 * this one for time-series buckets: a bucket's columns are long runs of
 * similar values, and zstd's larger window and entropy coding keep about a
 * third less than zlib on them (bench/ts_bench.js). Page format: the
 * frame's length (8 bytes, little-endian), then the zstd frame. The length
 * is needed because WiredTiger pads a block to its allocation size and
 * hands decompress the whole block: zstd must not read the padding as
 * another frame (WiredTiger's own snappy and zstd compressors do the same).
 *
 * The storage layer (src/storage/storage_wt.c) looks for this library
 * beside the running binary and libmayfly.so; without it, new bucket
 * tables use zlib, and a database that has zstd tables cannot be opened
 * (WiredTiger reports the unknown compressor).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <wiredtiger.h>
#include <wiredtiger_ext.h>
#include <zstd.h>

#define MF_ZSTD_LEVEL 3
#define LEN_BYTES 8 /* the compressed length, before the frame */

typedef struct zstd_compressor {
    WT_COMPRESSOR c; /* first: WiredTiger hands back this pointer */
    int level;
} zstd_compressor_t;

static int
zc_compress(WT_COMPRESSOR *compressor, WT_SESSION *session, uint8_t *src, size_t src_len, uint8_t *dst,
            size_t dst_len, size_t *result_lenp, int *compression_failed)
{
    zstd_compressor_t *z = (zstd_compressor_t *)compressor;
    (void)session;
    if (dst_len <= LEN_BYTES) {
        *compression_failed = 1;
        return 0;
    }
    size_t n = ZSTD_compress(dst + LEN_BYTES, dst_len - LEN_BYTES, src, src_len, z->level);
    if (ZSTD_isError(n) || n + LEN_BYTES >= src_len) {
        /* Does not fit (or does not pay): WiredTiger writes the page uncompressed. */
        *compression_failed = 1;
        return 0;
    }
    for (int i = 0; i < LEN_BYTES; i++)
        dst[i] = (uint8_t)((uint64_t)n >> (8 * i));
    *compression_failed = 0;
    *result_lenp = n + LEN_BYTES;
    return 0;
}

static int
zc_decompress(WT_COMPRESSOR *compressor, WT_SESSION *session, uint8_t *src, size_t src_len, uint8_t *dst,
              size_t dst_len, size_t *result_lenp)
{
    uint64_t len = 0;
    (void)compressor;
    (void)session;
    if (src_len < LEN_BYTES)
        return EIO;
    for (int i = 0; i < LEN_BYTES; i++)
        len |= (uint64_t)src[i] << (8 * i);
    if (len > src_len - LEN_BYTES)
        return EIO;
    size_t n = ZSTD_decompress(dst, dst_len, src + LEN_BYTES, (size_t)len);
    if (ZSTD_isError(n))
        return EIO;
    *result_lenp = n;
    return 0;
}

static int
zc_pre_size(WT_COMPRESSOR *compressor, WT_SESSION *session, uint8_t *src, size_t src_len, size_t *result_lenp)
{
    (void)compressor;
    (void)session;
    (void)src;
    *result_lenp = ZSTD_compressBound(src_len) + LEN_BYTES;
    return 0;
}

static int
zc_terminate(WT_COMPRESSOR *compressor, WT_SESSION *session)
{
    (void)session;
    free(compressor);
    return 0;
}

/* The entry point WiredTiger calls when it loads the library: registers "zstd". */
__attribute__((visibility("default"))) int
wiredtiger_extension_init(WT_CONNECTION *connection, WT_CONFIG_ARG *config)
{
    zstd_compressor_t *z = calloc(1, sizeof *z);
    (void)config;
    if (z == NULL)
        return ENOMEM;
    z->c.compress = zc_compress;
    z->c.decompress = zc_decompress;
    z->c.pre_size = zc_pre_size;
    z->c.terminate = zc_terminate;
    z->level = MF_ZSTD_LEVEL;
    int ret = connection->add_compressor(connection, "zstd", &z->c, NULL);
    if (ret != 0)
        free(z);
    return ret;
}
