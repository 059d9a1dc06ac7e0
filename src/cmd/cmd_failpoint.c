/*
 * cmd_failpoint.c: configureFailPoint, waitForFailPoint and the failCommand
 * fail point.
 *
 * configureFailPoint exists only when the server was started with
 * --setParameter enableTestCommands=1 (cmd_dispatch.c answers 59
 * CommandNotFound otherwise, as mongod does, and listCommands leaves it
 * out). It sets one of the engine's fail points (common/failpoint.h) and
 * answers {count: <times the point fired before>}.
 *
 * failCommand is how drivers test retries and timeouts against a server.
 * cmd_dispatch.c asks this file twice per command:
 *   - before the handler (mf_failcommand_before): a point whose data names
 *     the command (failCommands, or failAllCommands) and matches the
 *     client (appName, namespace; internal clients only with
 *     failInternalCommands) and asks for closeConnection, blockConnection
 *     or errorCode fires: it sleeps blockTimeMS (interruptibly), then drops
 *     the connection without a reply (closeConnection) or fails the command
 *     with errorCode and "Failing command via 'failCommand' failpoint";
 *     a block alone lets the command run;
 *   - after a successful handler (mf_failcommand_after): a point with
 *     writeConcernError adds that document to the reply, as mongod does for
 *     a write whose write concern failed.
 * The two are separate evaluations, as in mongod, so {times: 1} with only a
 * writeConcernError is used up by the first matching command's reply.
 * errorLabels in the data replace the labels the server would compute;
 * otherwise a retryable write (txnNumber) that fails with a retryable code,
 * or whose writeConcernError has one, gets "RetryableWriteError".
 */
#include <string.h>
#include <time.h>

#include "cmd/cmd.h"
#include "common/curop.h"
#include "common/failpoint.h"
#include "common/params.h"
#include "doc/value.h"

static const char *const fp_msg = "Failing command via 'failCommand' failpoint";

/* Command names that are one command in mongod (a name and its aliases). */
static const char *const aliases[][3] = {{"hello", "isMaster", "ismaster"},
                                         {"findAndModify", "findandmodify", NULL},
                                         {"buildInfo", "buildinfo", NULL},
                                         {"dbHash", "dbhash", NULL},
                                         {"dropIndexes", "deleteIndexes", NULL}};

static bool
same_command(const char *a, const char *b)
{
    if (strcmp(a, b) == 0)
        return true;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        bool ina = false, inb = false;
        for (int j = 0; j < 3 && aliases[i][j]; j++) {
            ina |= strcmp(aliases[i][j], a) == 0;
            inb |= strcmp(aliases[i][j], b) == 0;
        }
        if (ina && inb)
            return true;
    }
    return false;
}

typedef struct filter_arg {
    mf_op_t *op;
    bool after; /* the writeConcernError evaluation */
} filter_arg_t;

static bool
data_bool(const bson_t *data, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, data, key) && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

/* mongod's shouldActivateFailCommandFailPoint, plus what this evaluation needs the data to ask for. */
static bool
failcommand_filter(void *arg, const bson_t *data)
{
    filter_arg_t *fa = arg;
    mf_op_t *op = fa->op;
    bson_iter_t it, a;
    bool internal = op->client == NULL || op->client->internal || !op->client->net;

    if (bson_iter_init_find(&it, data, "appName")) {
        const char *app = op->client != NULL ? op->client->app_name : "";
        if (!BSON_ITER_HOLDS_UTF8(&it) || strcmp(bson_iter_utf8(&it, NULL), app) != 0)
            return false;
    }
    if (bson_iter_init_find(&it, data, "namespace")) {
        char ns[512];
        bson_iter_t c;
        const char *coll = "";
        if (bson_iter_init(&c, op->cmd) && bson_iter_next(&c) && BSON_ITER_HOLDS_UTF8(&c))
            coll = bson_iter_utf8(&c, NULL);
        snprintf(ns, sizeof(ns), "%s.%s", op->db, coll);
        if (!BSON_ITER_HOLDS_UTF8(&it) || strcmp(bson_iter_utf8(&it, NULL), ns) != 0)
            return false;
    }
    if (internal && !data_bool(data, "failInternalCommands"))
        return false;
    bool named = bson_has_field(data, "failAllCommands");
    if (!named && bson_iter_init_find(&it, data, "failCommands") &&
        (BSON_ITER_HOLDS_ARRAY(&it) || BSON_ITER_HOLDS_DOCUMENT(&it)) && bson_iter_recurse(&it, &a)) {
        while (!named && bson_iter_next(&a))
            named = BSON_ITER_HOLDS_UTF8(&a) && same_command(bson_iter_utf8(&a, NULL), op->name);
    }
    if (!named)
        return false;
    if (fa->after)
        return bson_iter_init_find(&it, data, "writeConcernError") && BSON_ITER_HOLDS_DOCUMENT(&it);
    return data_bool(data, "closeConnection") || data_bool(data, "blockConnection") ||
           (bson_iter_init_find(&it, data, "errorCode") && BSON_ITER_HOLDS_NUMBER(&it));
}

/* Copies data's errorLabels array (if any) into labels (an array being built). */
static void
take_labels(mf_op_t *op, const bson_t *data, bson_t *labels)
{
    bson_iter_t it, a;
    if (labels == NULL || !bson_iter_init_find(&it, data, "errorLabels") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &a))
        return;
    op->fp_labels_given = true;
    bson_reinit(labels);
    uint32_t i = 0;
    while (bson_iter_next(&a)) {
        char key[16];
        const char *kp;
        bson_uint32_to_string(i++, &kp, key, sizeof(key));
        bson_append_value(labels, kp, -1, bson_iter_value(&a));
    }
}

/* Sleeps ms milliseconds in short steps, failing early if the operation is killed or times out. */
static int
block_for(mf_op_t *op, int64_t ms)
{
    /* Microseconds: a millisecond clock would end up to 1 ms early. */
    int64_t end = mf_mono_us() + ms * 1000;
    for (;;) {
        if (mf_curop_check_current(&op->err) != 0)
            return -1;
        int64_t left = end - mf_mono_us();
        if (left <= 0)
            return 0;
        if (left > 20000)
            left = 20000;
        struct timespec ts = {0, (long)left * 1000L};
        nanosleep(&ts, NULL);
    }
}

int
mf_failcommand_before(mf_op_t *op, bson_t *labels)
{
    bson_t data;
    bson_iter_t it;
    int rc = 0;
    mf_failpoint_t *fp = op->eng->fp_fail_command;
    filter_arg_t fa = {op, false};

    if (!mf_failpoint_on(fp) || strcmp(op->name, "configureFailPoint") == 0)
        return 0;
    if (!mf_failpoint_eval(fp, failcommand_filter, &fa, &data))
        return 0;
    take_labels(op, &data, labels);
    if (data_bool(&data, "blockConnection")) {
        int64_t ms = 0;
        if (!bson_iter_init_find(&it, &data, "blockTimeMS") || !BSON_ITER_HOLDS_NUMBER(&it)) {
            rc = mf_err_set(&op->err, MF_E_InvalidOptions, "must specify 'blockTimeMS' when 'blockConnection' is true");
            goto done;
        }
        ms = bson_iter_as_int64(&it);
        if (ms < 0) {
            rc = mf_err_set(&op->err, MF_E_InvalidOptions, "'blockTimeMS' must be non-negative");
            goto done;
        }
        if (block_for(op, ms) != 0) {
            rc = -1;
            goto done;
        }
    }
    if (data_bool(&data, "closeConnection")) {
        if (op->client != NULL)
            op->client->close_requested = true;
        rc = mf_err_set(&op->err, MF_E_Location50985, "%s", fp_msg);
        goto done;
    }
    if (bson_iter_init_find(&it, &data, "errorCode") && BSON_ITER_HOLDS_NUMBER(&it)) {
        int64_t code = bson_iter_as_int64(&it);
        if (code != 0) {
            rc = mf_err_set(&op->err, (int)code, "%s", fp_msg);
            goto done;
        }
    }
done:
    bson_destroy(&data);
    return rc;
}

/* RetriableError codes (mongod's error category; the drivers' retryable write codes). */
bool
mf_cmd_retryable_code(int64_t code)
{
    static const int codes[] = {6, 7, 89, 91, 134, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (codes[i] == code)
            return true;
    return false;
}


void
mf_failcommand_labels(mf_op_t *op, const bson_t *labels, bson_t *reply)
{
    bson_iter_t it, w;
    bson_t arr;
    if (bson_has_field(reply, "errorLabels"))
        return;
    if (op->fp_labels_given && labels != NULL) {
        BSON_APPEND_ARRAY(reply, "errorLabels", labels);
        return;
    }
    /*
     * A change stream's aggregate or getMore that failed in a way a new
     * cursor would not (another member, a retry): drivers resume on this
     * label alone (error_labels.cpp isResumableChangeStreamError: retriable
     * and network errors, RetryChangeStream, FailedToSatisfyReadPreference,
     * the retargeting errors; never with a writeConcernError).
     */
    if (op->change_stream && !bson_has_field(reply, "writeConcernError") && bson_iter_init_find(&it, reply, "code") &&
        BSON_ITER_HOLDS_NUMBER(&it)) {
        int64_t c = bson_iter_as_int64(&it);
        if (mf_cmd_retryable_code(c) || c == MF_E_RetryChangeStream || c == MF_E_FailedToSatisfyReadPreference ||
            c == MF_E_StaleShardVersion || c == MF_E_StaleEpoch || c == MF_E_StaleConfig) {
            BSON_APPEND_ARRAY_BEGIN(reply, "errorLabels", &arr);
            BSON_APPEND_UTF8(&arr, "0", "ResumableChangeStreamError");
            bson_append_array_end(reply, &arr);
        }
        return;
    }
    /* Retryable writes, and a transaction's commit or abort (which drivers retry once, as mongod labels them). */
    if (op->name == NULL || !mf_op_has(op, "txnNumber") ||
        (!mf_cmd_is_retryable_write(op->name) && strcmp(op->name, "commitTransaction") != 0 &&
         strcmp(op->name, "abortTransaction") != 0))
        return;
    int64_t code = 0, wc_code = 0;
    if (bson_iter_init_find(&it, reply, "code") && BSON_ITER_HOLDS_NUMBER(&it))
        code = bson_iter_as_int64(&it);
    if (bson_iter_init_find(&it, reply, "writeConcernError") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &w) && bson_iter_find(&w, "code") && BSON_ITER_HOLDS_NUMBER(&w))
        wc_code = bson_iter_as_int64(&w);
    if (!mf_cmd_retryable_code(code) && !mf_cmd_retryable_code(wc_code))
        return;
    BSON_APPEND_ARRAY_BEGIN(reply, "errorLabels", &arr);
    BSON_APPEND_UTF8(&arr, "0", "RetryableWriteError");
    bson_append_array_end(reply, &arr);
}

void
mf_failcommand_after(mf_op_t *op, bson_t *reply)
{
    bson_t data, labels;
    bson_iter_t it;
    mf_failpoint_t *fp = op->eng->fp_fail_command;
    filter_arg_t fa = {op, true};

    if (!mf_failpoint_on(fp) || strcmp(op->name, "configureFailPoint") == 0)
        return;
    if (!mf_failpoint_eval(fp, failcommand_filter, &fa, &data))
        return;
    bson_init(&labels);
    take_labels(op, &data, &labels);
    if (bson_iter_init_find(&it, &data, "writeConcernError") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        !bson_has_field(reply, "writeConcernError"))
        bson_append_value(reply, "writeConcernError", -1, bson_iter_value(&it));
    mf_failcommand_labels(op, &labels, reply);
    bson_destroy(&labels);
    bson_destroy(&data);
}

bool
mf_failpoint_max_time(mf_op_t *op)
{
    return mf_failpoint_eval(op->eng->fp_max_time, NULL, NULL, NULL);
}

static int
cmd_configure_fail_point(mf_op_t *op)
{
    int64_t count = 0;
    if (mf_failpoint_configure(op->eng->failpoints, op->cmd, &count, &op->err) != 0)
        return -1;
    BSON_APPEND_INT64(op->reply, "count", count);
    return 0;
}

/*
 * waitForFailPoint: {waitForFailPoint: name, timesEntered: n, maxTimeMS}
 * returns once the point has fired n times since the server started (what
 * configureFailPoint's count said, plus the firings to wait for), as
 * mongod's; it waits in 10 ms steps, so killOp and maxTimeMS (50) end it.
 */
static int
cmd_wait_for_fail_point(mf_op_t *op)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, op->cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'waitForFailPoint.waitForFailPoint' is the wrong type, expected type 'string'");
    const char *name = bson_iter_utf8(&it, NULL);
    mf_failpoint_t *fp = mf_failpoint_find(op->eng->failpoints, name);
    if (fp == NULL)
        return mf_err_set(&op->err, MF_E_FailPointSetFailed, "%s not found", name);
    if (!mf_op_find(op, "timesEntered", &it))
        return mf_err_set(&op->err, MF_E_Location40414,
                          "BSON field 'waitForFailPoint.timesEntered' is missing but a required field");
    if (!BSON_ITER_HOLDS_NUMBER(&it))
        return mf_err_set(&op->err, MF_E_TypeMismatch,
                          "BSON field 'waitForFailPoint.timesEntered' is the wrong type '%s', expected type 'long'",
                          mf_type_name(bson_iter_type(&it)));
    int64_t target = bson_iter_as_int64(&it);
    while (mf_failpoint_times_entered(fp) < target) {
        if (mf_curop_check_current(&op->err) != 0)
            return -1;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static const char *const configure_fields[] = {"mode", "data", NULL};
static const char *const wait_fields[] = {"timesEntered", NULL};
static const char *const hash_fields[] = {"seed", NULL};

const mf_cmd_def_t mf_cmds_test[] = {
    {"configureFailPoint", cmd_configure_fail_point, MF_CMD_ADMIN_ONLY, configure_fields},
    {"waitForFailPoint", cmd_wait_for_fail_point, MF_CMD_ADMIN_ONLY, wait_fields},
    {"_hashBSONElement", mf_cmd_hash_bson_element, MF_CMD_NO_DB, hash_fields}, /* cmd_hash.c */
    {NULL, NULL, 0, NULL},
};
