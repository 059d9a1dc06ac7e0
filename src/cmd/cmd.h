/*
 * cmd.h: the command layer, the engine's entry point.
 *
 * mf_cmd_run takes one command (a database name, the command document and
 * any OP_MSG document sequences) and produces the reply document. It is the
 * only place that turns an mf_error_t into {ok: 0, errmsg, code, codeName}.
 * Commands are looked up in one table (cmd_dispatch.c) that every cmd_*.c
 * file contributes rows to; each row names the handler and flags.
 *
 * Threading: mf_cmd_run is called on worker threads, any number at once; it
 * uses the calling thread's storage session. Engine-wide state lives in
 * mf_engine_t (engine/engine.h).
 */
#ifndef MF_CMD_H
#define MF_CMD_H

#include <bson/bson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"
#include "common/curop.h"
#include "common/docvec.h"
#include "common/error.h"
#include "common/fmt.h"
#include "common/limits.h"
#include "doc/check.h"
#include "doc/collation.h"
#include "engine/engine.h"
#include "engine/sessions.h"


typedef struct mf_client_auth mf_client_auth_t; /* cmd_auth.c */

/*
 * Connection-level state a command may read (hello, whatsmyuri, ...). A
 * connection runs one command at a time, so none of it needs a lock.
 */
typedef struct mf_client {
    int64_t id;
    char remote[80];  /* "127.0.0.1:53211" (an IPv6 address of up to 63 characters and a port fit) */
    /*
     * The server's side of the connection, "ip:port" as remote (getsockname
     * when accepted): authenticationRestrictions' serverAddress. "" when
     * not a socket the network layer accepted (HTTP, embedding API).
     */
    char local[80];
    bool helloed;     /* its last hello that named helloOk said true (mongod's Client::supportsHello) */
    bool internal;    /* replication's own writes (the applier): not subject to the member's state or to access control */
    bool net;         /* a network connection: subject to access control when it is on */
    bool loopback;    /* from 127.0.0.0/8 or ::1 (the localhost exception) */
    mf_client_auth_t *auth; /* authentication state, NULL until first used; owned, freed by mf_client_release */
    char app_name[129];     /* the handshake's client.application.name ("" if none): failCommand's appName */
    /*
     * The first handshake's `client` document (driver, os, platform,
     * application), as currentOp's clientMetadata; NULL before. Set once
     * (as mongod keeps the first), so an operation may borrow it until it
     * ends; owned, freed by mf_client_release.
     */
    bson_t *metadata;
    bool metadata_final; /* a hello has run: no later one may send `client` (186), as mongod's tryFinalize */
    /* Its entry in the engine's registry of connections (currentOp's idle connections), NULL none; closed by mf_client_release. */
    mf_curop_conn_t *conn;
    bool close_requested;   /* set by a command (failCommand's closeConnection): drop the connection, send no reply */
    /*
     * The wire compressors this connection negotiated, in the client's
     * order: set by hello / isMaster with a `compression` list (each time,
     * as mongod renegotiates), read by the network layer to accept
     * OP_COMPRESSED requests (src/net/net.c).
     */
    mf_compressor_list_t compressors;
    /*
     * The connection's socket (has_sock: a wire-protocol connection,
     * src/net/net.c), which a command that waits long for something else
     * (an awaitData getMore) polls to notice the client hanging up, as
     * mongod's markKillOnClientDisconnect. Valid while a command runs
     * and the loop does not read the connection (it holds it for the
     * worker): a loop that reads sees the hang-up first, sets hung_up and
     * closes the socket (its number may then name another connection).
     */
    bool has_sock;
    int sock;
    atomic_bool hung_up;
} mf_client_t;

/* mf_client_release: frees what commands attached to c (its authentication state). Call when c goes away. */
void mf_client_release(mf_client_t *c);

/*
 * The command body's top-level fields as mf_op_find indexes them: each key
 * (pointing into the body) and its element's offset. A command looks up a
 * dozen or more of its fields (generic arguments, options), and each
 * bson_iter_init_find walks the body from the start.
 */
#define MF_OP_FIELDS 32

typedef struct mf_op_field {
    const char *key;
    uint32_t off, keylen;
} mf_op_field_t;

/* The operation context handed to each command handler. */
typedef struct mf_op {
    mf_engine_t *eng;
    mf_client_t *client;
    mf_sess_t *sess;
    const char *db;
    const bson_t *cmd;
    const char *name;          /* the command name as sent (first key) */
    const mf_docseq_t *seqs;   /* OP_MSG kind-1 sections */
    size_t nseqs;
    bool legacy;               /* arrived as OP_QUERY */
    bson_t *reply;             /* initialised; the handler appends its fields */
    mf_error_t err;
    /*
     * Set by aggregate and getMore once they read a change stream: their
     * errors of a resumable kind carry ResumableChangeStreamError
     * (mf_failcommand_labels), as mongod's ErrorLabelBuilder gives them.
     */
    bool change_stream;
    /* failCommand gave errorLabels (even []): they replace every label mongod would add (its errorLabelsOverride). */
    bool fp_labels_given;
    /*
     * Fields an error reply carries after code and codeName that do not fit
     * err's info (collMod's violations): set by the handler that fails,
     * owned by the op, appended and freed by mf_cmd_run.
     */
    bson_t *err_extra;
    /* The command's session (mf_cmd_session_use): has_lsid, its id and uid, for currentOp's lsid. */
    bool has_lsid;
    uint8_t lsid_id[16];
    uint8_t lsid_uid[32];
    /*
     * A retried insert, update or delete whose first attempt did part of
     * its statements (the repl hook's command_begin returned 2): the
     * handler skips the done ones (mf_crud_stmt_done) and adds their
     * counts. NULL otherwise; valid for the command's run.
     */
    const mf_stmt_resume_t *resume;
    /* write-error details for write commands that fail as a whole */
    /*
     * mf_op_find's index of cmd's fields, built on its first call: valid
     * while cmd, its data and its length are those recorded (a handler
     * that swaps cmd gets a new index); nfields -1: more than
     * MF_OP_FIELDS fields, lookups walk the body.
     */
    const bson_t *fields_of;
    const uint8_t *fields_data;
    uint32_t fields_len;
    int nfields;
    mf_op_field_t fields[MF_OP_FIELDS];
} mf_op_t;

typedef int (*mf_cmd_fn)(mf_op_t *op);

#define MF_CMD_ADMIN_ONLY 0x1 /* must run against the admin database */
#define MF_CMD_WRITE 0x2      /* counts as a write for serverStatus */
#define MF_CMD_NO_DB 0x4      /* database name is not validated */

typedef struct mf_cmd_def {
    const char *name;
    mf_cmd_fn fn;
    unsigned flags;
    /*
     * The command's own fields (NULL-terminated), or NULL for "not checked".
     * When set, any other field that is not a generic argument (lsid, $db,
     * writeConcern ...) fails with 40415 "BSON field 'x.y' is an unknown field."
     */
    const char *const *fields;
} mf_cmd_def_t;

/* Per-file command tables (NULL-name terminated). */
extern const mf_cmd_def_t mf_cmds_admin[];
extern const mf_cmd_def_t mf_cmds_crud[];
extern const mf_cmd_def_t mf_cmds_coll[];
extern const mf_cmd_def_t mf_cmds_collmod[];
extern const mf_cmd_def_t mf_cmds_compact[]; /* compact, fsync, fsyncUnlock (cmd_compact.c) */
extern const mf_cmd_def_t mf_cmds_auth[];    /* SASL, connectionStatus, logout, user management (cmd_auth.c) */
extern const mf_cmd_def_t mf_cmds_sessions[]; /* startSession, endSessions, killSessions ... (cmd_sessions.c) */
extern const mf_cmd_def_t mf_cmds_txn[];     /* commitTransaction, abortTransaction (cmd_txn.c) */
extern const mf_cmd_def_t mf_cmds_test[];    /* configureFailPoint (cmd_failpoint.c), _hashBSONElement (cmd_hash.c); only with enableTestCommands */

/*
 * The failCommand fail point (cmd_failpoint.c), around a command's handler.
 * mf_failcommand_before: -1 with op->err when the point fails the command
 * (errorCode; closeConnection also sets client->close_requested), after
 * sleeping blockTimeMS when it blocks; labels receives the point's
 * errorLabels (an array; left empty when none are given). 0 otherwise.
 * mf_failcommand_after: appends the point's writeConcernError (and its
 * labels) to a successful reply. mf_failcommand_labels: appends
 * errorLabels to reply: the point's when it gave any (op->fp_labels_given,
 * [] included), else MongoDB's own (RetryableWriteError for a retryable
 * write that failed with a retryable code, ResumableChangeStreamError for
 * a change stream's).
 */
int mf_failcommand_before(mf_op_t *op, bson_t *labels);
/* mf_cmd_is_retryable_write: the commands a txnNumber makes retryable writes (insert, update, delete, findAndModify, bulkWrite). */
bool mf_cmd_is_retryable_write(const char *name);
void mf_failcommand_after(mf_op_t *op, bson_t *reply);
void mf_failcommand_labels(mf_op_t *op, const bson_t *labels, bson_t *reply);
/* mf_failpoint_max_time: true if maxTimeAlwaysTimeOut is on (a command with maxTimeMS then fails with 50 at once). */
bool mf_failpoint_max_time(mf_op_t *op);
extern const mf_cmd_def_t mf_cmds_misc[];    /* convertToCapped, dbHash, dataSize, top, plan cache filters ... (cmd_misc.c) */
extern const mf_cmd_def_t mf_cmds_gridfs[];  /* filemd5 (cmd_gridfs.c) */
extern const mf_cmd_def_t mf_cmds_hash[];    /* convertShardKeyToHashed (cmd_hash.c) */
/* mf_cmd_hash_bson_element: the test command _hashBSONElement (cmd_hash.c; in mf_cmds_test). */
int mf_cmd_hash_bson_element(mf_op_t *op);

/*
 * Access control (cmd_auth.c). mf_cmd_authorize: with --auth, whether the
 * caller may run command name on op->db (0, or -1 with 13 Unauthorized in
 * op->err); always 0 for trusted callers. mf_cmd_may_see_db: whether
 * listDatabases shows db to the caller. mf_cmd_may_see_coll: whether
 * listCollections {authorizedCollections: true} shows db.coll (the caller
 * holds some privilege on it: a database-wide one for an ordinary
 * collection; a time-series collection's system.buckets.* needs a buckets
 * privilege, as mongod's).
 * mf_cmd_auth_hello: hello's
 * saslSupportedMechs and speculativeAuthenticate answers.
 */
int mf_cmd_authorize(mf_op_t *op, const char *name) MF_WUR;
bool mf_cmd_may_see_db(mf_op_t *op, const char *db);
bool mf_cmd_may_see_coll(mf_op_t *op, const char *db, const char *coll);
void mf_cmd_auth_hello(mf_op_t *op);
/* mf_cmd_requires_auth: whether command name needs a logged-in user under --auth (listCommands' requiresAuth). */
bool mf_cmd_requires_auth(const char *name);
/*
 * mf_cmd_generic_check: the generic arguments every command is checked for
 * before it runs (cmd_misc.c): the Stable API (apiVersion, apiStrict,
 * apiDeprecationErrors: 322, 323, 4886600) and, on a standalone, the
 * readConcern options only a replica set serves (snapshot, linearizable,
 * afterOpTime, atClusterTime: 123; afterClusterTime: 20). name is the
 * command's table name. 0 or -1 with op->err.
 */
int mf_cmd_generic_check(mf_op_t *op, const char *name) MF_WUR;
/*
 * Logical sessions (cmd_sessions.c). mf_cmd_session_use: records the use
 * of the session a command names in its lsid (if any) in the engine's
 * session cache; 0, or -1 with op->err (a malformed lsid: 14, 40414, 40415,
 * 201; a full cache: 261). mf_cmd_sessions_list: the rows of
 * $listLocalSessions / $listSessions (stage is the stage's name, spec its
 * validated options) pushed to out; 0, or -1 with err (13 when listing
 * other users' sessions without the privilege).
 */
int mf_cmd_session_use(mf_op_t *op) MF_WUR;
/* mf_cmd_session_id: the id of the session op names in its lsid (already validated) into id; false if none. */
bool mf_cmd_session_id(const mf_op_t *op, uint8_t id[16]);
/*
 * mf_cmd_session_check_cursor: a getMore's session against the one its
 * cursor was opened in, as mongod's validateLSID: 50736 (cursor without a
 * session, getMore in one), 50737 (the reverse), 50738 (another session).
 * has_lsid/lsid/owner are the cursor's. 0, or -1 with op->err.
 */
int mf_cmd_session_check_cursor(mf_op_t *op, int64_t cursor_id, bool has_lsid, const uint8_t lsid[16],
                                const char *owner) MF_WUR;
int mf_cmd_sessions_list(mf_op_t *op, const char *stage, const bson_t *spec, mf_docvec_t *out, mf_error_t *err) MF_WUR;
/* mf_cmd_auth_cluster: whether the caller holds the cluster actions cacts (MF_CACT_*, auth/roles.h); true without access control. */
bool mf_cmd_auth_cluster(mf_op_t *op, uint32_t cacts);
/* mf_cmd_auth_owner: "user@db" of the caller into out (cap bytes), "" when access control does not apply. */
void mf_cmd_auth_owner(mf_op_t *op, char *out, size_t cap);
/*
 * mf_cmd_auth_user: whether client has authenticated; then its user name
 * and database in *user and *db (borrowed: valid while the connection runs
 * no other command, as long as an operation of its own lasts).
 */
bool mf_cmd_auth_user(const mf_client_t *client, const char **user, const char **db);

/*
 * mf_cmd_auth_refresh: recomputes client's privileges if users or roles
 * changed since, reading the latest ones. Called on the connection's thread
 * before a command goes to its transaction's thread, whose reads see the
 * transaction's snapshot (there, privileges are not reloaded).
 */
void mf_cmd_auth_refresh(mf_engine_t *eng, mf_client_t *client);
/*
 * mf_cmd_user_roles: builds into *out (initialized here; the caller
 * destroys it) the value of $$USER_ROLES for the command op runs, as
 * mongod's Variables::defineUserRoles (variables.cpp): one
 * {_id: "<db>.<role>", role, db} per role the authenticated user holds,
 * directly or inherited (AuthorizationSession's getAuthenticatedRoleNames,
 * built from getIndirectRoles), the same list connectionStatus reports;
 * an empty array when no one is authenticated. Privileges are reloaded
 * first if users or roles changed (outside a transaction), so a role
 * granted since shows up.
 */
void mf_cmd_user_roles(mf_op_t *op, bson_t *out);
/*
 * currentOp's own operations ($ownOps: true, $currentOp's allUsers: false):
 * mf_cmd_curop_own_only fills *owner with the caller's "user@db" ("" when
 * not authenticated) and its session uid (its SHA-256, computed once per
 * listing), and tells whether the listing must keep to it (own_only asked
 * and access control applies to the caller; without it every operation
 * shows, as mongod's). mf_cmd_curop_owned_by tells whether a currentOp
 * document is owner's: by its effectiveUsers (an operation, a connection)
 * or its lsid's uid (an idle session or cursor); background work and
 * unauthenticated clients are nobody's.
 */
typedef struct mf_curop_owner {
    char name[400]; /* "user@db", as a cursor's owner */
    uint8_t uid[MF_SESSION_UID_LEN];
} mf_curop_owner_t;
bool mf_cmd_curop_own_only(mf_op_t *op, bool own_only, mf_curop_owner_t *owner);
bool mf_cmd_curop_owned_by(const bson_t *doc, const mf_curop_owner_t *owner);


/*
 * mf_cmd_run: runs one command and fills reply (initialised by the caller)
 * with the full reply including ok. db is the target database. Never fails:
 * errors become {ok: 0, ...} replies.
 */
void mf_cmd_run(mf_engine_t *eng, mf_client_t *client, const char *db, const bson_t *cmd, const mf_docseq_t *seqs,
                size_t nseqs, bool legacy, bson_t *reply);

/*
 * mf_cmd_error_reply: replaces reply's content with MongoDB's error reply
 * {ok: 0, errmsg, code, codeName, ...err->info} (the network layer uses it
 * for requests that never reach a command).
 */
void mf_cmd_error_reply(bson_t *reply, const mf_error_t *err);

/*
 * mf_cmd_legacy_op_error: replaces reply's content with mongod 8.0's answer
 * to a removed legacy read (op_name "OP_QUERY" on a collection, or
 * "OP_GET_MORE"): {$err: "<op_name> is no longer supported. The client
 * driver may require an upgrade. For more details see
 * https://dochub.mongodb.org/core/legacy-opcode-removal", code: 5739101,
 * ok: 0.0}, sent in an OP_REPLY with QueryFailure set.
 */
void mf_cmd_legacy_op_error(bson_t *reply, const char *op_name);

/* Helpers for handlers (cmd_util.c). Clocks: common/clock.h. */

/*
 * mf_op_docs: the documents of array field `field`, taken from the command
 * body or from a kind-1 sequence with that identifier. *docs points at an
 * array of static views valid for the command's life (free with free()).
 * Returns 0, or -1 with err (14 TypeMismatch if the field is not an array).
 * A missing field yields zero documents when optional, else 40414-style error.
 */
int mf_op_docs(mf_op_t *op, const char *field, bool optional, bson_t **docs, size_t *n) MF_WUR;

/*
 * mf_op_find: bson_iter_init_find on op->cmd (the first field named field,
 * case-sensitive), through the index above. Returns false if there is none;
 * *it is then undefined.
 */
bool mf_op_find(mf_op_t *op, const char *field, bson_iter_t *it);
/* mf_op_has: bson_has_field on op->cmd, through the same index. */
bool mf_op_has(mf_op_t *op, const char *field);

/* Field access with MongoDB's type errors (14 TypeMismatch "BSON field 'x.y' is the wrong type 'string', expected type 'object'"). */
int mf_op_get_doc(mf_op_t *op, const char *field, bson_t *out, bool *present) MF_WUR;
int mf_op_get_int64(mf_op_t *op, const char *field, int64_t *out, bool *present) MF_WUR;
int mf_op_get_bool(mf_op_t *op, const char *field, bool *out, bool *present) MF_WUR;
int mf_op_get_string(mf_op_t *op, const char *field, const char **out, bool *present) MF_WUR;

/*
 * mf_cmd_cursor_register: registers cur (checked out) for the caller (its
 * connection and user) within the maxOpenCursors and
 * maxOpenCursorsPerConnection limits. Returns its id, or -1 with op->err
 * (146, cur not taken: the caller frees it).
 */
struct mf_cursor;
int64_t mf_cmd_cursor_register(mf_op_t *op, struct mf_cursor *cur);

/*
 * Typed fields, as MongoDB's IDL declares a command's (or a sub-document's)
 * fields. mf_op_check_types checks each field of doc named in spec: a value
 * of another type is 14 TypeMismatch "BSON field '<ctx>.<f>' is the wrong
 * type '<t>', expected type '<e>'"; MF_FT_NONNEG below 0 is 51024 "BSON
 * field '<f>' value must be >= 0, actual value '<v>'"; null counts as
 * absent (IDL's checkAndAssertType). With strict, a field neither in spec
 * nor (for a command, top_level) a generic argument is 40415 "BSON field
 * '<ctx>.<f>' is an unknown field."; top_level also skips the first field
 * (the command name). 0, or -1 with op->err.
 */
typedef enum {
    MF_FT_ANY,    /* any type (its own handler checks it) */
    MF_FT_OBJ,    /* object */
    MF_FT_ARR,    /* array */
    MF_FT_STR,    /* string */
    MF_FT_BOOL,   /* IDL safeBool / optionalBool: a bool or a number */
    MF_FT_NUM,    /* IDL safeInt64 / safeInt: a number */
    MF_FT_NONNEG, /* a number, >= 0 (51024) */
} mf_field_type_t;
typedef struct mf_field_spec {
    const char *name;
    mf_field_type_t type;
} mf_field_spec_t;
int mf_op_check_types(mf_op_t *op, const char *ctx, const bson_t *doc, const mf_field_spec_t *spec, bool strict,
                      bool top_level) MF_WUR;
/*
 * mf_write_concern_shape: a writeConcern document as mongod's
 * WriteConcernOptions parser reads it, for a command's writeConcern and for
 * setDefaultRWConcern's defaultWriteConcern alike: w a number in [0, 50]
 * (9), a string or an object (9 otherwise); j, fsync safe bools and
 * wtimeout(MS) numbers (14; null counts as absent); not both j and fsync
 * (9); no field outside the parser's (9). What it read goes to *out: w a
 * view into wc (value_type BSON_TYPE_EOD when absent), whether j and fsync
 * are true and provenance given. 0, or -1 with err.
 */
typedef struct mf_wc_shape {
    bson_value_t w;
    int64_t wnum; /* a numeric w as mongod's safeNumberLong reads it: truncated (1.5 is 1), NaN 0 */
    bool journal, fsync, provenance;
} mf_wc_shape_t;
int mf_write_concern_shape(mf_error_t *err, const bson_t *wc, mf_wc_shape_t *out) MF_WUR;
/*
 * mf_read_concern_shape: the readConcern at field as mongod's
 * ReadConcernArgs parses it: an object (9), level a string (14) naming a
 * level (9), after/atClusterTime timestamps (14), no other option (72), and
 * none of the combinations it refuses (72). 0, or -1 with err.
 */
int mf_read_concern_shape(mf_error_t *err, const bson_iter_t *field) MF_WUR;
/*
 * mf_cmd_check_inner_fields: the 40415 check of a command nested in another
 * (explain's): cmd's fields against its command's own list and the generic
 * arguments. 0, or -1 with op->err.
 */
int mf_cmd_check_inner_fields(mf_op_t *op, const bson_t *cmd) MF_WUR;
/*
 * mf_cmd_pre_images_option: a create's or collMod's (cmd_name)
 * changeStreamPreAndPostImages value, as its IDL struct parses it ({enabled:
 * bool}, required and alone: 14, 40414, 40415) and as mongod permits it (not
 * enabled in admin, local or config: 72). Sets *enabled. 0, or -1 with
 * op->err.
 */
int mf_cmd_pre_images_option(mf_op_t *op, const char *cmd_name, const bson_iter_t *it, bool *enabled) MF_WUR;
/*
 * mf_cmd_validation_option: a create's or collMod's (cmd_name) validator,
 * validationLevel or validationAction at it, as their IDL fields parse them
 * (an object; the ValidationLevel / ValidationAction enums of
 * collection_options.idl): 14 or 2 with the "<cmd_name>.<field>" path. Other
 * fields pass. 0, or -1 with op->err.
 */
int mf_cmd_validation_option(mf_op_t *op, const char *cmd_name, const bson_iter_t *it) MF_WUR;
/*
 * mf_cmd_options_canonical: reorders a collection's stored options (not a
 * view's) as mongod's CollectionOptions::appendBSON writes them, which is
 * what listCollections shows: capped, size, max, autoIndexId, temp,
 * recordPreImages, changeStreamPreAndPostImages, storageEngine,
 * indexOptionDefaults, validator, validationLevel, validationAction,
 * collation, clusteredIndex, expireAfterSeconds, viewOn, pipeline, idIndex,
 * timeseries, encryptedFields; any other field after them, in its order.
 */
void mf_cmd_options_canonical(bson_t *opts);
/*
 * mf_cmd_count_validator: counts a create's (collmod false) or collMod's
 * non-empty validator v in serverStatus metrics.commands.<cmd>.validator
 * (total; failed when !parsed; jsonSchema when it has a top-level
 * $jsonSchema), as mongod's ValidatorCounters::incrementCounters.
 */
void mf_cmd_count_validator(mf_op_t *op, bool collmod, const bson_value_t *v, bool parsed);
/* mf_cmd_validator_parses: whether the validator in opts parses under its level, action and collation (true: none). */
bool mf_cmd_validator_parses(const bson_t *opts);
/*
 * mf_cmd_append_command_metrics: serverStatus metrics.commands into out:
 * {"<UNKNOWN>": n, <name>: {failed, total}} for each command, by name.
 */
void mf_cmd_append_command_metrics(mf_engine_t *eng, bson_t *out);
/* mf_cmd_log_commands: whether every command is logged (logLevel, or the command component's verbosity, >= 1). */
bool mf_cmd_log_commands(mf_engine_t *eng);
/*
 * mf_cmd_check_view_options: a view's options (viewOn, pipeline): the
 * pipeline parses and does not write (OptionNotSupportedOnView). Options
 * without viewOn pass. 0, or -1 with op->err.
 */
int mf_cmd_check_view_options(mf_op_t *op, const bson_t *opts) MF_WUR;
/*
 * mf_cmd_view_graph_check: whether db.name may become a view on view_on
 * running pipeline (the array value, may be NULL) with the "collation" of
 * collation_holder (a view's options; none: simple), as mongod's view graph
 * checks it: the views it reads directly share its collation (167 "...has
 * conflicting collation with view..."), no cycle through viewOn or any
 * stage that reads a collection (5 GraphContainsCycle), no view deeper
 * than 20 through it either way (165), every view it reaches or that
 * reaches it shares its collation (167). 0 or -1 with op->err. Catalog
 * lock held.
 */
int mf_cmd_view_graph_check(mf_op_t *op, const char *db, const char *name, const char *view_on,
                            const bson_value_t *pipeline, const bson_t *collation_holder) MF_WUR;
/* mf_cmd_is_generic_arg: whether k is one of the generic arguments every command accepts (cmd_dispatch.c). */
bool mf_cmd_is_generic_arg(const char *k);

/* mf_op_coll_name: the collection named by the command's first field (must be a string). */
int mf_op_coll_name(mf_op_t *op, const char **name) MF_WUR;

/*
 * mf_op_coll_expire_range: a time-series or clustered collection's
 * expireAfterSeconds d (already >= 0; NaN counts as 0, as mongod's
 * safeInt64 reads it) is no later than now since the epoch; later values
 * and +Infinity are 72, never cast (create and collMod alike).
 * mf_double_clamp_ll: d as a long long for a message, clamped as mongod's
 * safeNumberLong (no out-of-range cast).
 */
int mf_op_coll_expire_range(mf_op_t *op, double d) MF_WUR;
long long mf_double_clamp_ll(double d);

/*
 * mf_op_safe_bool: a field mongod's IDL types safeBool (collMod's hidden,
 * unique, dryRun ..., getParameter's allParameters/showDetails): a bool, or
 * a number read as its truth value; anything else is 14 naming path.
 */
int mf_op_safe_bool(mf_op_t *op, const char *path, const bson_iter_t *it, bool *out) MF_WUR;

/*
 * mf_op_doc_array: an array field mongod's IDL types array<object> (the
 * arrayFilters of update, findAndModify and bulkWrite): an element that is
 * not a document is 14 "BSON field '<path>.<i>' is the wrong type '<t>',
 * expected type 'object'", failing the whole command. arr is on the array.
 */
int mf_op_doc_array(mf_op_t *op, const char *path, const bson_iter_t *arr) MF_WUR;

/*
 * mf_cmd_view_collation_is: whether view v's default collation (its
 * options' "collation", none: simple) is c (NULL: simple). Catalog lock held.
 */
bool mf_cmd_view_collation_is(const mf_coll_t *v, const mf_collation_t *c);

/*
 * mf_cmd_check_names: refuses a command whose names of namespaces or indexes
 * hold a NUL byte (the command's first field, to, viewOn, collection, the
 * $db/coll/from/into of $out, $merge, $lookup, $graphLookup and $unionWith in
 * its pipeline and their sub-pipelines, an index name of dropIndexes or
 * collMod, a hint): the code reads names as C strings, where
 * "victim\0x" is "victim", so such a name would act on another object
 * (rename, drop or overwrite it). 73 InvalidNamespace for namespaces, 27
 * IndexNotFound for index names, 2 BadValue for a hint. 0, or -1 with op->err.
 */
int mf_cmd_check_names(mf_op_t *op) MF_WUR;


/*
 * Multi-document transactions (cmd_txn.c). mf_cmd_txn_route: called first
 * by mf_cmd_run; a command of a transaction on a replica-set member (one
 * with autocommit, startTransaction, or commit/abortTransaction) is checked
 * against its session's transaction and run on that transaction's thread,
 * or refused (251, 225, 256, 117, 72): true, with reply written. false:
 * not a transaction's command here (a standalone, an internal client, the
 * transaction's own thread), mf_cmd_run goes on.
 */
bool mf_cmd_txn_route(mf_engine_t *eng, mf_client_t *client, const char *db, const bson_t *cmd,
                      const mf_docseq_t *seqs, size_t nseqs, bool legacy, bson_t *reply);
/* mf_cmd_retryable_code: code is a RetriableError (mongod's category): a retryable write's RetryableWriteError label. */
bool mf_cmd_retryable_code(int64_t code);
/* mf_cmd_in_txn: the calling thread runs a transaction's command (its own thread). */
bool mf_cmd_in_txn(void);
/*
 * mf_cmd_txn_identity: on a transaction's thread, appends the session's
 * lsid ({id, uid}) and the txnNumber to out, as a change event of the
 * transaction carries them; false (nothing appended) elsewhere.
 */
bool mf_cmd_txn_identity(bson_t *out);
/* mf_cmd_txn_check: a transaction's command allowed as sent (the command, its database, writeConcern, readConcern). */
int mf_cmd_txn_check(mf_op_t *op) MF_WUR;
/* mf_cmd_txn_number: whether op is a statement of a transaction (autocommit: false); *n its txnNumber. */
bool mf_cmd_txn_number(mf_op_t *op, int64_t *n);
/*
 * mf_cmd_txn_check_cursor: a getMore's transaction against the cursor's, as
 * mongod: 50739 (cursor outside any, getMore in one), 50740 (the reverse),
 * 50741 (another transaction). 0, or -1 with op's error.
 */
int mf_cmd_txn_check_cursor(mf_op_t *op, int64_t cursor_id, bool in_txn, int64_t txn_number) MF_WUR;
/*
 * mf_cmd_txn_prepare: before the handler, refuses writes to time-series
 * and capped collections (263) and creates the collections a write would
 * create (insert, upsert, bulkWrite's inserts and upserts, or what `create`
 * names) outside the transaction; *done when that was the command (create).
 * 0 or -1 with op->err.
 */
int mf_cmd_txn_prepare(mf_op_t *op, bool *done) MF_WUR;
/*
 * mf_cmd_txn_write_error: after a transaction's write command: a write
 * error (bulkWrite: nErrors > 0) aborts the transaction and the reply keeps
 * only the first; true
 * when that was a WriteConflict, which is now op->err (reply emptied).
 */
bool mf_cmd_txn_write_error(mf_op_t *op);
/*
 * mf_cmd_txn_failed: after a transaction's command failed (reply has the
 * error; ran: its handler ran): aborts the transaction unless the command
 * was refused before running in a transaction already under way; adds
 * mongod's errorLabels (unless failCommand gave its own: op->fp_labels_given).
 */
void mf_cmd_txn_failed(mf_op_t *op, bson_t *reply, bool ran);
/*
 * mf_cmd_txn_retryable: a retryable write's txnNumber against its session's
 * transactions: older than the newest is 225; newer aborts an open one.
 * 0 or -1 with op->err.
 */
int mf_cmd_txn_retryable(mf_op_t *op) MF_WUR;
/* mf_cmd_txn_stats: serverStatus transactions' counts of multi-document transactions into out. */
void mf_cmd_txn_stats(mf_engine_t *eng, bson_t *out);
/*
 * mf_cmd_txn_report_ops: mf_curops_report_each over eng's operations, an
 * operation that runs in a multi-document transaction given its
 * transaction's "transaction" sub-document (as mongod's
 * reportUnstashedState: parameters, startWallClockTime, the times so far,
 * expiryTime) at its end. doc is valid during the call; fn runs without
 * either registry's lock.
 */
void mf_cmd_txn_report_ops(mf_engine_t *eng, void (*fn)(void *arg, const bson_t *doc), void *arg);
/*
 * mf_cmd_txn_report_idle: calls fn(arg, doc) with $currentOp's idleSession
 * document of every open transaction no command is running in (type,
 * host, desc "inactive transaction", the connection that ran its last
 * command, lsid, transaction {parameters, startWallClockTime, timeOpenMicros,
 * timeActiveMicros, timeInactiveMicros, expiryTime}, active: false); doc
 * is valid during the call. fn runs without the registry's lock.
 */
void mf_cmd_txn_report_idle(mf_engine_t *eng, void (*fn)(void *arg, const bson_t *doc), void *arg);
/* mf_cmd_txn_end_sessions: aborts the open transactions of session id (NULL: any) of uid (NULL: any user). */
void mf_cmd_txn_end_sessions(mf_engine_t *eng, const uint8_t id[16], const uint8_t *uid);

#endif /* MF_CMD_H */
