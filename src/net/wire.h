/*
 * wire.h: MongoDB wire protocol framing (no sockets here; see net.c).
 *
 * Every message starts with a 16-byte header, little-endian int32s:
 *
 *   offset  size  field
 *   0       4     messageLength (whole message, header included)
 *   4       4     requestID
 *   8       4     responseTo
 *   12      4     opCode (2004 OP_QUERY, 1 OP_REPLY, 2013 OP_MSG, 2012 OP_COMPRESSED;
 *                 the legacy 2001 OP_UPDATE, 2002 OP_INSERT, 2005 OP_GET_MORE,
 *                 2006 OP_DELETE, 2007 OP_KILL_CURSORS, which MongoDB 5.1+
 *                 refuses: net.c answers them as mongod 8.0 does)
 *
 * OP_MSG (2013): flagBits uint32 (bit 0 checksumPresent, bit 1 moreToCome,
 * bit 16 exhaustAllowed), then sections until the end (minus a trailing CRC-32C
 * when checksumPresent): kind 0 = one BSON document (the body, exactly one);
 * kind 1 = int32 size, cstring identifier, then BSON documents filling size.
 *
 * OP_QUERY (2004): flags int32, fullCollectionName cstring, numberToSkip
 * int32, numberToReturn int32, query document, optional returnFieldsSelector.
 *
 * OP_REPLY (1): responseFlags int32, cursorID int64, startingFrom int32,
 * numberReturned int32, documents. responseFlags bit 1 (QueryFailure, 2)
 * marks a {$err, code} document; a command's reply over OP_QUERY has bit 3
 * (AwaitCapable, 8) set, as mongod's LegacyReplyBuilder sets it, error or
 * not.
 *
 * OP_COMPRESSED (2012): originalOpcode int32, uncompressedSize int32,
 * compressorId uint8, then the wrapped message's body compressed
 * (wire_compress.c has the layout and the checks).
 *
 * Parsing validates every length against the buffer and every BSON document
 * with bson_validate, so a malformed message is an error, never a crash.
 */
#ifndef MF_WIRE_H
#define MF_WIRE_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compressor.h"
#include "common/error.h"
#include "common/limits.h"

#define MF_OP_REPLY 1
#define MF_OP_UPDATE 2001
#define MF_OP_INSERT 2002
#define MF_OP_QUERY 2004
#define MF_OP_GET_MORE 2005
#define MF_OP_DELETE 2006
#define MF_OP_KILL_CURSORS 2007
#define MF_OP_COMPRESSED 2012
#define MF_OP_MSG 2013

/* OP_REPLY responseFlags (mongod's ResultFlag_ErrSet and ResultFlag_AwaitCapable). */
#define MF_REPLY_QUERY_FAILURE (1u << 1)
#define MF_REPLY_AWAIT_CAPABLE (1u << 3)

#define MF_MSG_CHECKSUM_PRESENT (1u << 0)
#define MF_MSG_MORE_TO_COME (1u << 1)
#define MF_MSG_EXHAUST_ALLOWED (1u << 16)

#define MF_MAX_SECTIONS 64

/* The message header's size, and OP_COMPRESSED's own header after it. */
#define MF_WIRE_HEADER_SIZE 16
#define MF_COMPRESSED_HEADER_SIZE 9

typedef struct mf_msg_header {
    int32_t length;
    int32_t request_id;
    int32_t response_to;
    int32_t opcode;
} mf_msg_header_t;

/* Kind-1 document sequences are mf_docseq_t (common/limits.h): docs point into the message buffer. */

/*
 * A parsed request. All bson_t and strings point into the caller's message
 * buffer, which must outlive the mf_msg_t.
 */
typedef struct mf_msg {
    mf_msg_header_t hdr;
    uint32_t flags;      /* OP_MSG flagBits; OP_QUERY flags */
    bson_t body;         /* OP_MSG kind-0 section; OP_QUERY query document */
    mf_docseq_t seqs[MF_MAX_SECTIONS];
    size_t nseqs;
    /* OP_QUERY only */
    const char *full_collection_name;
    int32_t number_to_skip;
    int32_t number_to_return;
    bson_t return_fields;   /* OP_QUERY returnFieldsSelector, valid when has_return_fields */
    bool has_return_fields;
} mf_msg_t;

/* mf_wire_read_header: decodes the 16-byte header at buf (len >= 16). */
void mf_wire_read_header(const uint8_t *buf, mf_msg_header_t *hdr);

/*
 * mf_wire_parse: parses a whole message (buf, len == header length). Returns
 * 0, or -1 with err (code 17 ProtocolError for framing faults, 22 InvalidBSON
 * for a bad document, 10334 BSONObjectTooLarge for a document over 16 MiB +
 * 16 KiB). On success release with mf_wire_msg_destroy.
 */
int mf_wire_parse(const uint8_t *buf, size_t len, mf_msg_t *msg, mf_error_t *err) MF_WUR;
void mf_wire_msg_destroy(mf_msg_t *msg);

/*
 * mf_wire_build_msg: builds an OP_MSG reply with one kind-0 section holding
 * body. Returns a malloc'd buffer (caller frees) and its length in *len.
 */
uint8_t *mf_wire_build_msg(int32_t request_id, int32_t response_to, uint32_t flags, const bson_t *body, size_t *len);

/*
 * mf_wire_peek_command: copies the command name (the first key of the body
 * document; inside $query/query for a wrapped OP_QUERY) of the whole message
 * buf/len into name (cap bytes, NUL-terminated) without parsing or
 * validating the rest. Used on the I/O thread to pick a worker lane. Returns
 * false if the message is not an OP_MSG / OP_QUERY, is truncated, or the name
 * does not fit; the full parse later reports any real fault.
 */
bool mf_wire_peek_command(const uint8_t *buf, size_t len, char *name, size_t cap);

/*
 * mf_wire_build_reply: builds an OP_REPLY with one document and
 * responseFlags flags (MF_REPLY_*) for a legacy request. Returns a malloc'd
 * buffer (caller frees) and its length in *len.
 */
uint8_t *mf_wire_build_reply(int32_t request_id, int32_t response_to, uint32_t flags, const bson_t *doc,
                             size_t *len);

/*
 * mf_wire_decompress: unwraps the OP_COMPRESSED message buf/len (its whole
 * length, as framed) into the message it carries, header included, in a
 * malloc'd buffer the caller frees (*out, *out_len). The compressor must be
 * on configured (else 1 InternalError) and, unless negotiated is NULL, on
 * negotiated (else 2 BadValue); every other fault (sizes, corrupt data) is
 * 2 BadValue with mongod's message. *compressor is set to the envelope's
 * compressor id whenever the envelope is long enough to have one. Returns 0,
 * or -1 with err and *out NULL. The result is framed like any message but
 * not otherwise checked: parse it with mf_wire_parse.
 */
int mf_wire_decompress(const uint8_t *buf, size_t len, const mf_compressor_list_t *configured,
                       const mf_compressor_list_t *negotiated, uint8_t **out, size_t *out_len, int *compressor,
                       mf_error_t *err) MF_WUR;

/*
 * mf_wire_compress: wraps the whole message msg/len (len >= 16) in an
 * OP_COMPRESSED envelope compressed with compressor, keeping its requestID
 * and responseTo. Returns a malloc'd buffer the caller frees, its length in
 * *out_len, or NULL when the result might not fit maxMessageSizeBytes or
 * the library fails (the caller then sends msg as it is, as mongod does).
 */
uint8_t *mf_wire_compress(const uint8_t *msg, size_t len, int compressor, size_t *out_len);

/* mf_crc32c: CRC-32C (Castagnoli) of buf, as OP_MSG's checksum uses. */
uint32_t mf_crc32c(const uint8_t *buf, size_t len);

#endif /* MF_WIRE_H */
