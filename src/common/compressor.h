/*
 * compressor.h: the wire protocol's message compressors by name and id.
 *
 * OP_COMPRESSED (src/net/wire_compress.c) names its compressor by a one-byte
 * id; the handshake (hello's `compression`, src/cmd/cmd_admin.c), the
 * server option (--networkMessageCompressors, src/server/main.c) and
 * serverStatus name them by string. Both are mongod's
 * (message_compressor_registry.cpp, getMessageCompressorName):
 *
 *   id  name
 *   0   noop     the body as it is (testing only; offered when configured)
 *   1   snappy
 *   2   zlib
 *   3   zstd
 *
 * Ids 4-255 are reserved. This table is all this header holds: the codecs
 * live in the network layer, which is the only one that compresses.
 */
#ifndef MF_COMMON_COMPRESSOR_H
#define MF_COMMON_COMPRESSOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define MF_COMPRESSOR_NOOP 0
#define MF_COMPRESSOR_SNAPPY 1
#define MF_COMPRESSOR_ZLIB 2
#define MF_COMPRESSOR_ZSTD 3
#define MF_COMPRESSOR_COUNT 4 /* ids 0 .. MF_COMPRESSOR_COUNT - 1 exist */

/* mongod's default --networkMessageCompressors (8.0). */
#define MF_COMPRESSORS_DEFAULT "snappy,zstd,zlib"

/*
 * A list of compressors in order of preference, each at most once (the
 * server's configured list; a connection's negotiated one).
 */
typedef struct mf_compressor_list {
    uint8_t ids[MF_COMPRESSOR_COUNT];
    uint8_t n;
} mf_compressor_list_t;

/* mf_compressor_name: the handshake name of id ("snappy"), or NULL for an id that does not exist. */
const char *mf_compressor_name(int id);

/* mf_compressor_id: the id of the compressor called name (len bytes, not NUL-terminated), or -1. */
int mf_compressor_id(const char *name, size_t len);

/* mf_compressor_list_has: true if id is on list. */
bool mf_compressor_list_has(const mf_compressor_list_t *list, int id);

/*
 * mf_compressor_list_parse: reads --networkMessageCompressors as mongod's
 * storeMessageCompressionOptions does: "disabled" is the empty list, else
 * names split on commas and spaces (empty pieces skipped). A name repeated
 * counts once. Returns 0, or -1 with err (BadValue, mongod's message:
 * "Invalid network message compressor specified in configuration: NAME").
 */
int mf_compressor_list_parse(const char *spec, mf_compressor_list_t *list, mf_error_t *err) MF_WUR;

#endif /* MF_COMMON_COMPRESSOR_H */
