/*
 * limits.h: the limits MongoDB 8.0 advertises in hello and enforces, and the
 * shape of a command's document sequences: what both the engine (cmd/) and
 * the wire protocol (net/) need, kept here so that the engine does not
 * include the wire protocol's header.
 */
#ifndef MF_LIMITS_H
#define MF_LIMITS_H

#include <bson/bson.h>
#include <stddef.h>

#define MF_MAX_BSON_SIZE (16 * 1024 * 1024) /* maxBsonObjectSize */
/*
 * mongod's BSONObjMaxInternalSize: the most a document it builds may have
 * (16 MiB + 16 KiB of slack for the server's own wrapping, 16793600). A
 * command document, a pipeline's output document or a projected find
 * result beyond it is 10334 BSONObjectTooLarge.
 */
#define MF_MAX_BSON_INTERNAL_SIZE (MF_MAX_BSON_SIZE + 16 * 1024)
#define MF_MAX_MESSAGE_SIZE 48000000        /* maxMessageSizeBytes */
#define MF_MAX_WRITE_BATCH 100000           /* maxWriteBatchSize */
#define MF_MAX_STORED_DEPTH 180             /* nesting a stored document may have (MongoDB: 200 - 20; 15 beyond) */
#define MF_MAX_FIELD_PATH_COMPONENTS 200    /* a field path's components (mongod's FieldPath: 15 "FieldPath is too long") */
#define MF_MAX_REGEX_LENGTH 32764           /* $regex pattern bytes (MongoDB: 51091 beyond) */
#define MF_MAX_PIPELINE_STAGES 1000        /* stages in one pipeline (MongoDB's internalPipelineLengthLimit; 7749501 beyond) */
#define MF_MAX_ACCUMULATOR_BYTES (100 * 1024 * 1024) /* one $push/$addToSet array (MongoDB: 146 beyond) */
#define MF_MAX_ARRAY_PADDING 1500000        /* nulls an update may add to reach an array index (MongoDB: 34) */

/*
 * local.oplog.rs documents' _id (repl/repl.c writes it, change streams read
 * it): the raft index << MF_OPLOG_OPS_BITS | the op's place in its entry.
 * The ops of one entry have consecutive timestamps, so an op's place tells
 * the timestamp of its entry's first op (a transaction's clusterTime).
 */
#define MF_OPLOG_OPS_BITS 20

/*
 * A kind-1 document sequence of an OP_MSG (or any list of documents a
 * command takes beside its body): docs are static views into a buffer that
 * outlives the command.
 */
typedef struct mf_docseq {
    const char *identifier; /* NUL-terminated */
    bson_t *docs;           /* owned array of static bson_t views (bson_init_static) */
    size_t ndocs;
} mf_docseq_t;

#endif /* MF_LIMITS_H */
