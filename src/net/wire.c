/*
 * wire.c: MongoDB wire protocol framing: header decode, OP_MSG and OP_QUERY
 * parsing, OP_MSG and OP_REPLY building, CRC-32C (see wire.h for layouts).
 *
 * Design and invariants:
 *
 *   - The parser never reads outside [buf, buf + len). Every length field is
 *     checked against the bytes that remain before it is used, and every
 *     cstring is searched for its NUL only inside its enclosing bound.
 *   - Every BSON document is first walked by an iterative structural checker
 *     (check_document) that bounds nesting at MF_WIRE_MAX_DEPTH levels with an
 *     explicit stack, so a nesting bomb cannot blow the C stack. It makes
 *     every check libbson's bson_validate (no flags) makes, field names
 *     valid UTF-8 included, so the documents are not walked a second time;
 *     fuzz/fuzz_bson.c holds the two to the same verdict.
 *   - The parsed mf_msg_t holds static views (bson_init_static) into the
 *     caller's buffer. The only heap memory parse allocates is the docs array
 *     of each kind-1 document sequence; mf_wire_msg_destroy frees exactly
 *     that. On failure parse frees what it allocated itself, and leaves *msg
 *     zeroed so that a stray destroy is harmless.
 *   - Errors: framing faults are 17 ProtocolError; sections that frame
 *     but do not make a request are mongod's OpMsg::parse codes (40430 two
 *     bodies, 40431 a repeated sequence, 40432 an unknown kind, 40587 no
 *     body, 40433 a field both in the body and a sequence), which the
 *     connection answers and lives on; a malformed document is 22
 *     InvalidBSON, a document nested deeper than MongoDB's limit (200) is 15
 *     Overflow with MongoDB's wording, and a document over 16 MiB + 16 KiB is
 *     10334 BSONObjectTooLarge.
 */
#include "common/alloc.h"
#include "net/wire.h"

#include <stdlib.h>
#include <string.h>

/* MongoDB allows command documents 16 KiB of slack over the 16 MiB limit. */
#define MF_WIRE_MAX_DOC MF_MAX_BSON_INTERNAL_SIZE
/* BSONDepth::getMaxAllowableDepth() in MongoDB. */
#define MF_WIRE_MAX_DEPTH 200

static uint32_t
rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static int32_t
rd_i32(const uint8_t *p)
{
    return (int32_t)rd_u32(p);
}

static void
wr_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static void
wr_u64(uint8_t *p, uint64_t v)
{
    wr_u32(p, (uint32_t)v);
    wr_u32(p + 4, (uint32_t)(v >> 32));
}

void
mf_wire_read_header(const uint8_t *buf, mf_msg_header_t *hdr)
{
    hdr->length = rd_i32(buf);
    hdr->request_id = rd_i32(buf + 4);
    hdr->response_to = rd_i32(buf + 8);
    hdr->opcode = rd_i32(buf + 12);
}

/* ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) ---- */

static uint32_t crc_table[256];
static bool crc_ready;

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
    /* Benign if two threads race: both write identical values. */
    __atomic_store_n(&crc_ready, true, __ATOMIC_RELEASE);
}

uint32_t
mf_crc32c(const uint8_t *buf, size_t len)
{
    uint32_t c = 0xFFFFFFFFu;

    if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
        crc_init();
    for (size_t i = 0; i < len; i++)
        c = crc_table[(c ^ buf[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- BSON structural check ---- */

/*
 * Whether the n bytes at p are UTF-8, as bson_utf8_validate judges them
 * (no NUL can be among them: they come from a cstring). Field names are
 * nearly always ASCII, which needs no decoding: libbson's check costs about
 * a hundred instructions per name, a third of a small document's check.
 */
static bool
name_is_utf8(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 0x80)
            return bson_utf8_validate((const char *)p, n, false);
    }
    return true;
}

/* Length of the cstring at p within [p, end), excluding its NUL, or -1. */
static ptrdiff_t
cstr_len(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *z;

    if (p >= end)
        return -1;
    z = memchr(p, 0, (size_t)(end - p));
    return z ? z - p : -1;
}

/*
 * check_document: iteratively walks the document at doc (exactly doclen
 * bytes, already checked to lie inside the buffer and to start with doclen).
 * Returns 0 or -1 with err. Never recurses.
 */
static int
check_document(const uint8_t *doc, size_t doclen, mf_error_t *err)
{
    /* stack[i] is the offset of frame i's terminating NUL byte. */
    size_t stack[MF_WIRE_MAX_DEPTH + 2];
    size_t depth = 0;
    size_t p = 4;

    if (doclen < 5 || doc[doclen - 1] != 0)
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON document");
    stack[depth++] = doclen - 1;
    while (depth > 0) {
        size_t end = stack[depth - 1];
        uint8_t type;
        ptrdiff_t klen;
        size_t need = 0;
        int32_t l;

        if (p > end)
            return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: element overruns its document");
        type = doc[p];
        if (type == 0) {
            if (p != end)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: early document terminator");
            depth--;
            p++;
            continue;
        }
        p++;
        klen = cstr_len(doc + p, doc + end);
        if (klen < 0)
            return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: unterminated field name");
        /* As libbson's validation: a field name is UTF-8 (libbson checks the bytes). */
        if (!name_is_utf8(doc + p, (size_t)klen))
            return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: field name is not valid UTF-8");
        p += (size_t)klen + 1;
        /* The value must lie in [p, end). */
        switch (type) {
        case 0x01: /* double */
        case 0x09: /* date */
        case 0x11: /* timestamp */
        case 0x12: /* int64 */
            need = 8;
            break;
        case 0x10: /* int32 */
            need = 4;
            break;
        case 0x13: /* decimal128 */
            need = 16;
            break;
        case 0x07: /* ObjectId */
            need = 12;
            break;
        case 0x08: /* bool */
            if (p >= end || doc[p] > 1)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad boolean");
            need = 1;
            break;
        case 0x06: /* undefined */
        case 0x0A: /* null */
        case 0x7F: /* MaxKey */
        case 0xFF: /* MinKey */
            need = 0;
            break;
        case 0x02: /* string */
        case 0x0D: /* code */
        case 0x0E: /* symbol */
        case 0x0C: /* DBPointer: string + 12 */
            if (end - p < 4)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: truncated string");
            l = rd_i32(doc + p);
            if (l < 1 || (size_t)l > end - p - 4 || doc[p + 4 + (size_t)l - 1] != 0)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad string length");
            need = 4 + (size_t)l + (type == 0x0C ? 12 : 0);
            break;
        case 0x05: /* binary */
            if (end - p < 5)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: truncated binary");
            l = rd_i32(doc + p);
            if (l < 0)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad binary length");
            need = 5 + (size_t)l;
            /*
             * The old binary subtype (2) repeats its length inside: it must
             * be l - 4, or libbson's iterator stops at this element and every
             * later field of the document is silently unseen.
             */
            if (doc[p + 4] == 0x02 &&
                (l < 4 || need > end - p || rd_i32(doc + p + 5) != l - 4))
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad binary subtype 2 length");
            break;
        case 0x0B: { /* regex: two cstrings */
            ptrdiff_t a = cstr_len(doc + p, doc + end), b;
            if (a < 0)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad regex");
            b = cstr_len(doc + p + a + 1, doc + end);
            if (b < 0)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad regex");
            need = (size_t)a + (size_t)b + 2;
            break;
        }
        case 0x03: /* document */
        case 0x04: /* array */
        case 0x0F: { /* code with scope: int32 total, string, document */
            size_t dstart = p;
            if (type == 0x0F) {
                int32_t total, sl;
                if (end - p < 14)
                    return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: truncated code with scope");
                total = rd_i32(doc + p);
                if (total < 14 || (size_t)total > end - p)
                    return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad code with scope length");
                sl = rd_i32(doc + p + 4);
                if (sl < 1 || (size_t)sl > (size_t)total - 8 - 5 || doc[p + 8 + (size_t)sl - 1] != 0)
                    return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad code with scope string");
                dstart = p + 8 + (size_t)sl;
                if (rd_i32(doc + dstart) != (int32_t)(p + (size_t)total - dstart))
                    return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad code with scope length");
            }
            if (end - dstart < 5)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: truncated subdocument");
            l = rd_i32(doc + dstart);
            if (l < 5 || (size_t)l > end - dstart || doc[dstart + (size_t)l - 1] != 0)
                return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: bad subdocument length");
            if (depth > MF_WIRE_MAX_DEPTH)
                return mf_err_set(err, MF_E_Overflow, "BSONObj exceeded maximum nested object depth: %d",
                                  MF_WIRE_MAX_DEPTH);
            stack[depth++] = dstart + (size_t)l - 1;
            p = dstart + 4;
            continue;
        }
        default:
            return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: unknown element type 0x%02x", type);
        }
        if (need > end - p)
            return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: element overruns its document");
        p += need;
    }
    if (p != doclen)
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON: trailing bytes in document");
    return 0;
}

/*
 * read_document: reads one BSON document at buf[*off] that must end at or
 * before limit, sets *out to a static view and advances *off. Returns 0 or -1.
 */
static int
read_document(const uint8_t *buf, size_t *off, size_t limit, bson_t *out, mf_error_t *err)
{
    size_t avail = limit - *off;
    int32_t dl;

    if (*off > limit || avail < 4)
        return mf_err_set(err, MF_E_ProtocolError, "message truncated: no room for a BSON document");
    dl = rd_i32(buf + *off);
    if (dl < 5)
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON document length %d", dl);
    if ((size_t)dl > MF_WIRE_MAX_DOC)
        return mf_err_set(err, MF_E_BSONObjectTooLarge, "BSONObj size: %d (0x%X) is invalid. Size must be between 0 and %d(16MB)",
                          dl, (unsigned)dl, MF_WIRE_MAX_DOC);
    if ((size_t)dl > avail)
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON document: length %d exceeds the %zu bytes left", dl, avail);
    /*
     * check_document is the whole check libbson's bson_validate (no flags)
     * makes, in one pass without its visitor's callbacks, which walked every
     * incoming document a second time (a tenth of an insert's CPU).
     * fuzz/fuzz_bson.c holds them to the same verdict both ways.
     */
    if (check_document(buf + *off, (size_t)dl, err) != 0)
        return -1;
    if (!bson_init_static(out, buf + *off, (size_t)dl))
        return mf_err_set(err, MF_E_InvalidBSON, "invalid BSON document");
    *off += (size_t)dl;
    return 0;
}

/* ---- parsing ---- */

void
mf_wire_msg_destroy(mf_msg_t *msg)
{
    if (msg == NULL)
        return;
    for (size_t i = 0; i < msg->nseqs; i++) {
        free(msg->seqs[i].docs);
        msg->seqs[i].docs = NULL;
        msg->seqs[i].ndocs = 0;
    }
    msg->nseqs = 0;
}

/* parse_docseq: the kind-1 section whose size field is at buf[*off]. */
static int
parse_docseq(const uint8_t *buf, size_t *off, size_t end, mf_msg_t *msg, mf_error_t *err)
{
    size_t start = *off, send, p, n = 0;
    int32_t size;
    ptrdiff_t il;
    mf_docseq_t *seq;

    if (end - start < 4)
        return mf_err_set(err, MF_E_ProtocolError, "OP_MSG document sequence truncated");
    size = rd_i32(buf + start);
    if (size < 5 || (size_t)size > end - start)
        return mf_err_set(err, MF_E_ProtocolError, "invalid OP_MSG document sequence size %d", size);
    send = start + (size_t)size;
    il = cstr_len(buf + start + 4, buf + send);
    if (il < 0)
        return mf_err_set(err, MF_E_ProtocolError, "OP_MSG document sequence identifier is not terminated");
    if (msg->nseqs >= MF_MAX_SECTIONS)
        return mf_err_set(err, MF_E_ProtocolError, "too many OP_MSG document sequences (limit %d)", MF_MAX_SECTIONS);
    for (size_t i = 0; i < msg->nseqs; i++)
        if (strcmp(msg->seqs[i].identifier, (const char *)buf + start + 4) == 0)
            return mf_err_set(err, MF_E_Location40431, "Duplicate document sequence: %s", (const char *)buf + start + 4);
    p = start + 4 + (size_t)il + 1;

    /* First pass: count and validate the documents. */
    for (size_t q = p; q < send; n++) {
        bson_t tmp;
        if (read_document(buf, &q, send, &tmp, err) != 0)
            return -1;
    }
    seq = &msg->seqs[msg->nseqs];
    seq->identifier = (const char *)buf + start + 4;
    seq->ndocs = n;
    seq->docs = NULL;
    if (n > 0) {
        /* bson_t demands 128-byte alignment (libbson declares it so). */
        seq->docs = aligned_alloc(128, n * sizeof(bson_t));
        if (seq->docs != NULL)
            memset(seq->docs, 0, n * sizeof(bson_t));
        if (seq->docs == NULL)
            return mf_err_set(err, MF_E_InternalError, "out of memory");
        for (size_t i = 0; i < n; i++) {
            int32_t dl = rd_i32(buf + p);
            /* Already validated above; this cannot fail. */
            (void)bson_init_static(&seq->docs[i], buf + p, (size_t)dl);
            p += (size_t)dl;
        }
    }
    msg->nseqs++;
    *off = send;
    return 0;
}

static int
parse_op_msg(const uint8_t *buf, size_t len, mf_msg_t *msg, mf_error_t *err)
{
    size_t off = 16, end = len;
    bool have_body = false;
    uint32_t unknown;

    if (len < 21)
        return mf_err_set(err, MF_E_ProtocolError, "OP_MSG too short");
    msg->flags = rd_u32(buf + 16);
    off = 20;
    unknown = msg->flags & 0xFFFFu & ~(MF_MSG_CHECKSUM_PRESENT | MF_MSG_MORE_TO_COME);
    if (unknown != 0) {
        int bit = __builtin_ctz(unknown);
        return mf_err_set(err, MF_E_ProtocolError, "Message contains illegal flags value: Flag %d", bit);
    }
    if (msg->flags & MF_MSG_CHECKSUM_PRESENT) {
        if (len < 25)
            return mf_err_set(err, MF_E_ProtocolError, "OP_MSG too short for its checksum");
        end = len - 4;
        if (mf_crc32c(buf, end) != rd_u32(buf + end))
            return mf_err_set(err, MF_E_ProtocolError, "OP_MSG checksum does not match contents");
    }
    while (off < end) {
        uint8_t kind = buf[off++];
        if (kind == 0) {
            if (have_body)
                return mf_err_set(err, MF_E_Location40430, "Multiple body sections in message");
            if (read_document(buf, &off, end, &msg->body, err) != 0)
                return -1;
            have_body = true;
        } else if (kind == 1) {
            if (parse_docseq(buf, &off, end, msg, err) != 0)
                return -1;
        } else {
            return mf_err_set(err, MF_E_Location40432, "Unknown section kind %u", (unsigned)kind);
        }
    }
    if (!have_body)
        return mf_err_set(err, MF_E_Location40587, "OP_MSG messages must have a body");
    /* A field both in the body and as a document sequence: which one the command means is unclear. */
    for (size_t i = 0; i < msg->nseqs; i++)
        if (bson_has_field(&msg->body, msg->seqs[i].identifier))
            return mf_err_set(err, MF_E_Location40433, "Duplicate field between body and document sequence %s",
                              msg->seqs[i].identifier);
    return 0;
}

static int
parse_op_query(const uint8_t *buf, size_t len, mf_msg_t *msg, mf_error_t *err)
{
    size_t off = 20;
    ptrdiff_t nl;

    if (len < 20)
        return mf_err_set(err, MF_E_ProtocolError, "OP_QUERY too short");
    msg->flags = rd_u32(buf + 16);
    nl = cstr_len(buf + off, buf + len);
    if (nl < 0)
        return mf_err_set(err, MF_E_ProtocolError, "OP_QUERY namespace is not terminated");
    msg->full_collection_name = (const char *)buf + off;
    off += (size_t)nl + 1;
    if (len - off < 8)
        return mf_err_set(err, MF_E_ProtocolError, "OP_QUERY truncated");
    msg->number_to_skip = rd_i32(buf + off);
    msg->number_to_return = rd_i32(buf + off + 4);
    off += 8;
    if (read_document(buf, &off, len, &msg->body, err) != 0)
        return -1;
    if (off < len) {
        if (read_document(buf, &off, len, &msg->return_fields, err) != 0)
            return -1;
        msg->has_return_fields = true;
    }
    if (off != len)
        return mf_err_set(err, MF_E_ProtocolError, "OP_QUERY has trailing bytes");
    return 0;
}

int
mf_wire_parse(const uint8_t *buf, size_t len, mf_msg_t *msg, mf_error_t *err)
{
    int rc;

    memset(msg, 0, sizeof(*msg));
    if (buf == NULL || len < 16)
        return mf_err_set(err, MF_E_ProtocolError, "message shorter than its header");
    mf_wire_read_header(buf, &msg->hdr);
    if (msg->hdr.length < 16 || (size_t)msg->hdr.length != len)
        return mf_err_set(err, MF_E_ProtocolError, "message length %d does not match the %zu bytes received",
                          msg->hdr.length, len);
    if (msg->hdr.length > MF_MAX_MESSAGE_SIZE)
        return mf_err_set(err, MF_E_ProtocolError, "message length %d exceeds the maximum %d", msg->hdr.length,
                          MF_MAX_MESSAGE_SIZE);
    switch (msg->hdr.opcode) {
    case MF_OP_MSG:
        rc = parse_op_msg(buf, len, msg, err);
        break;
    case MF_OP_QUERY:
        rc = parse_op_query(buf, len, msg, err);
        break;
    default:
        rc = mf_err_set(err, MF_E_ProtocolError, "unsupported opcode %d", msg->hdr.opcode);
        break;
    }
    if (rc != 0) {
        mf_msg_header_t hdr = msg->hdr;
        mf_wire_msg_destroy(msg);
        memset(msg, 0, sizeof(*msg));
        msg->hdr = hdr;
    }
    return rc;
}

/* ---- building ---- */

static void
write_header(uint8_t *p, size_t len, int32_t request_id, int32_t response_to, int32_t opcode)
{
    wr_u32(p, (uint32_t)len);
    wr_u32(p + 4, (uint32_t)request_id);
    wr_u32(p + 8, (uint32_t)response_to);
    wr_u32(p + 12, (uint32_t)opcode);
}

uint8_t *
mf_wire_build_msg(int32_t request_id, int32_t response_to, uint32_t flags, const bson_t *body, size_t *len)
{
    bool crc = (flags & MF_MSG_CHECKSUM_PRESENT) != 0;
    size_t n = 16 + 4 + 1 + body->len + (crc ? 4 : 0);
    uint8_t *p = mf_malloc(n);

    if (p == NULL) {
        *len = 0;
        return NULL;
    }
    write_header(p, n, request_id, response_to, MF_OP_MSG);
    wr_u32(p + 16, flags);
    p[20] = 0;
    memcpy(p + 21, bson_get_data(body), body->len);
    if (crc)
        wr_u32(p + n - 4, mf_crc32c(p, n - 4));
    *len = n;
    return p;
}

uint8_t *
mf_wire_build_reply(int32_t request_id, int32_t response_to, uint32_t flags, const bson_t *doc, size_t *len)
{
    size_t n = 16 + 4 + 8 + 4 + 4 + doc->len;
    uint8_t *p = mf_malloc(n);

    if (p == NULL) {
        *len = 0;
        return NULL;
    }
    write_header(p, n, request_id, response_to, MF_OP_REPLY);
    wr_u32(p + 16, flags); /* responseFlags */
    wr_u64(p + 20, 0); /* cursorID */
    wr_u32(p + 28, 0); /* startingFrom */
    wr_u32(p + 32, 1); /* numberReturned */
    memcpy(p + 36, bson_get_data(doc), doc->len);
    *len = n;
    return p;
}

/*
 * First key of the BSON document at doc (avail bytes readable) into name.
 * If descend is set and that key is $query/query holding a document, the
 * first key of that document instead (legacy wrapped commands).
 */
static bool
peek_first_key(const uint8_t *doc, size_t avail, bool descend, char *name, size_t cap)
{
    if (avail < 5)
        return false;
    int32_t dlen = rd_i32(doc);
    if (dlen < 5 || (size_t)dlen > avail)
        return false;
    uint8_t type = doc[4];
    if (type == 0)
        return false;
    const uint8_t *key = doc + 5, *end = doc + dlen;
    const uint8_t *nul = memchr(key, 0, (size_t)(end - key));
    if (nul == NULL)
        return false;
    size_t klen = (size_t)(nul - key);
    if (descend && type == 0x03 && (strcmp((const char *)key, "$query") == 0 || strcmp((const char *)key, "query") == 0))
        return peek_first_key(nul + 1, (size_t)(end - (nul + 1)), false, name, cap);
    if (klen == 0 || klen >= cap)
        return false;
    memcpy(name, key, klen + 1);
    return true;
}

bool
mf_wire_peek_command(const uint8_t *buf, size_t len, char *name, size_t cap)
{
    mf_msg_header_t hdr;
    if (len < 16 || cap == 0)
        return false;
    mf_wire_read_header(buf, &hdr);
    if (hdr.length < 16 || (size_t)hdr.length != len)
        return false;
    if (hdr.opcode == MF_OP_MSG) {
        size_t off = 20;
        if (len < off)
            return false;
        uint32_t flags = rd_u32(buf + 16);
        size_t end = (flags & MF_MSG_CHECKSUM_PRESENT) ? len - 4 : len;
        while (off < end) {
            uint8_t kind = buf[off++];
            if (kind == 0)
                return peek_first_key(buf + off, end - off, false, name, cap);
            if (kind != 1 || end - off < 4)
                return false;
            int32_t slen = rd_i32(buf + off);
            if (slen < 4 || (size_t)slen > end - off)
                return false;
            off += (size_t)slen;
        }
        return false;
    }
    if (hdr.opcode == MF_OP_QUERY) {
        size_t off = 20;
        if (len <= off)
            return false;
        const uint8_t *nul = memchr(buf + off, 0, len - off);
        if (nul == NULL)
            return false;
        off = (size_t)(nul - buf) + 1 + 8; /* numberToSkip, numberToReturn */
        if (off >= len)
            return false;
        return peek_first_key(buf + off, len - off, true, name, cap);
    }
    return false;
}
