/*
 * params.c: the parameter table (see params.h).
 *
 * Defaults and bounds are MongoDB 8.0's. The TTL parameters are used by the
 * TTL monitor (src/ttl); batchedDeletesTargetBatchDocs by batched deletes.
 */
#include "common/alloc.h"
#include "common/params.h"
#include "common/fmt.h"

#include <pthread.h>
#include <stdatomic.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


#define I64MAX INT64_MAX
static const mf_param_t defaults[] = {
    {"ttlMonitorEnabled", MF_PARAM_BOOL, 0, 1, false, true, true, 1, NULL},
    {"ttlMonitorSleepSecs", MF_PARAM_INT, 0, INT32_MAX, true, true, true, 60, NULL},
    {"ttlMonitorBatchDeletes", MF_PARAM_BOOL, 0, 1, false, true, true, 1, NULL},
    {"ttlIndexDeleteTargetDocs", MF_PARAM_INT, 0, INT32_MAX, false, true, true, 50000, NULL},
    {"ttlIndexDeleteTargetTimeMS", MF_PARAM_INT, 0, INT32_MAX, false, true, true, 1000, NULL},
    {"ttlMonitorSubPassTargetSecs", MF_PARAM_INT, 0, INT32_MAX, false, true, true, 60, NULL},
    /* mayfly's own (beyond MongoDB, SPEC D7/D9) */
    {"ttlMonitorPrecise", MF_PARAM_BOOL, 0, 1, false, true, true, 1, NULL},
    {"ttlMonitorBatchDocs", MF_PARAM_INT, 1, 100000, false, true, true, 500, NULL},
    /* How long a worker that answered a request waits for the connection's next one (src/net/net.c), µs; 0: never. */
    {"netConnectionHoldMicros", MF_PARAM_INT, 0, 1000000, false, true, false, 5000, NULL},
    /* Precise passes start at most this often, ms: deadlines closer than this share a pass (src/ttl/ttl_monitor.c). */
    {"ttlMonitorCoalesceMS", MF_PARAM_INT, 0, 1000, false, true, true, 5, NULL},
    /*
     * The TTL monitor reads every TTL index's deadline again at its first recomputation (after a pass or a
     * wake-up) this long after the last such read, ms; in between it reads only the indexes a pass visited and
     * those writes brought forward (src/ttl/ttl_monitor.c, "Deadlines").
     */
    {"ttlMonitorDeadlineRefreshMS", MF_PARAM_INT, 100, 3600000, false, true, true, 1000, NULL},
    /* Threads deleting one visit's batches in parallel (0: one per CPU granted: affinity and cgroup quota), src/ttl/ttl_monitor.c. */
    {"ttlMonitorWorkers", MF_PARAM_INT, 0, 16, false, true, true, 0, NULL},
    /* Replica sets: raft entries between snapshots, and entries kept behind one (src/repl/repl.c). */
    {"replSnapshotThreshold", MF_PARAM_INT, 8, INT32_MAX, false, true, false, 8192, NULL},
    {"replSnapshotTrailing", MF_PARAM_INT, 0, INT32_MAX, false, true, false, 4096, NULL},
    /* Raft's election timeout (randomised up to twice this) and leader heartbeat, ms. */
    {"replElectionTimeoutMillis", MF_PARAM_INT, 100, 60000, false, true, false, 500, NULL},
    {"replHeartbeatMillis", MF_PARAM_INT, 10, 10000, false, true, false, 50, NULL},
    {"ttlMonitorYieldPercent", MF_PARAM_INT, 0, 1000, false, true, true, 0, NULL},
    /* The server's scheduling group's nice value during a mass expiry beside clients; 0: left alone (src/ttl). */
    {"ttlMonitorGroupNice", MF_PARAM_INT, 0, 19, false, true, true, 19, NULL},
    /* Archive-on-expire (SPEC I2): archive segments older than this many seconds are removed; 0 keeps them forever. */
    {"archiveRetentionSeconds", MF_PARAM_INT, 0, I64MAX / 1000, false, true, true, 0, NULL},
    {"batchedDeletesTargetBatchDocs", MF_PARAM_INT, 0, I64MAX, false, true, true, 10, NULL},
    {"cursorTimeoutMillis", MF_PARAM_INT, 0, I64MAX, false, true, true, 600000, NULL},
    /* Open cursors in all and per connection: past them a command that would leave one open answers 146. */
    {"maxOpenCursors", MF_PARAM_INT, 1, I64MAX, false, true, true, 1000000, NULL},
    {"maxOpenCursorsPerConnection", MF_PARAM_INT, 1, I64MAX, false, true, true, 20000, NULL},
    /* Blocking aggregation stages ($sort, $group, $bucket) spill to disk beyond these (src/query/agg_spill.c). */
    {"internalQueryMaxBlockingSortMemoryUsageBytes", MF_PARAM_INT, 0, I64MAX, false, true, true, 104857600, NULL},
    {"internalDocumentSourceGroupMaxMemoryBytes", MF_PARAM_INT, 1, I64MAX, false, true, true, 104857600, NULL},
    /* One $setWindowFields partition held in memory (src/query/agg_window.c). */
    {"internalDocumentSourceSetWindowFieldsMaxMemoryBytes", MF_PARAM_INT, 1, I64MAX, false, true, true, 104857600, NULL},
    /* $densify: documents it may generate, and the memory of its table of partitions (src/query/agg_densify.c). */
    {"internalQueryMaxAllowedDensifyDocs", MF_PARAM_INT, 0, INT32_MAX, true, true, true, 500000, NULL},
    {"internalDocumentSourceDensifyMaxMemoryBytes", MF_PARAM_INT, 0, I64MAX, true, true, true, 104857600, NULL},
    /* What one $lookup may join to one document (4568 past it), src/query/agg.c run_lookup; at least 16 MB as in mongod. */
    {"internalLookupStageIntermediateDocumentMaxSizeBytes", MF_PARAM_INT, 16777216, I64MAX, false, true, true, 104857600, NULL},
    /* The logical session cache (engine/sessions.h): its size and idle timeout, startup-only as in mongod. */
    {"maxSessions", MF_PARAM_INT, 1, INT32_MAX, false, true, false, 1000000, NULL},
    {"localLogicalSessionTimeoutMinutes", MF_PARAM_INT, 1, INT32_MAX, false, true, false, 30, NULL},
    /* Multi-document transactions (cmd/cmd_txn.c): one older than this is aborted, as mongod. */
    {"transactionLifetimeLimitSeconds", MF_PARAM_INT, 1, I64MAX / 1000, false, true, true, 60, NULL},
    {"allowDiskUseByDefault", MF_PARAM_BOOL, 0, 1, false, true, true, 1, NULL},
    /* Queries with a filter that would scan a whole collection fail (291), as mongod's (query/plan.c no_table_scan). */
    {"notablescan", MF_PARAM_BOOL, 0, 1, false, true, true, 0, NULL},
    /* $$USER_ROLES is bound (else 51144), as mongod's enableAccessToUserRoles (expression_context.cpp), cmd/cmd_dispatch.c. */
    {"enableAccessToUserRoles", MF_PARAM_BOOL, 0, 1, false, true, true, 1, NULL},
    /* Test-only commands (configureFailPoint), as mongod's: settable only at startup. */
    {"enableTestCommands", MF_PARAM_BOOL, 0, 1, false, true, false, 0, NULL},
    {"logLevel", MF_PARAM_INT, 0, 5, false, true, true, 0, NULL},
    {"featureCompatibilityVersion", MF_PARAM_STRING, 0, 0, false, false, false, 0, "8.0"},
    {"authenticationMechanisms", MF_PARAM_STRING, 0, 0, false, false, false, 0, "SCRAM-SHA-1,SCRAM-SHA-256"},
};
#define NPARAMS (sizeof(defaults) / sizeof(defaults[0]))
#define MAX_LISTENERS 8
#define HASH_SLOTS 128 /* a power of two, over twice NPARAMS: lookups by name probe a slot or two */

struct mf_params {
    mf_param_t tab[NPARAMS];
    /*
     * Names hashed to tab indexes + 1 (0: empty), open addressing. Commands
     * look parameters up by name several times each (logLevel, cursor
     * limits), and a scan of the table compared up to all of its names.
     */
    uint8_t slot[HASH_SLOTS];
    pthread_mutex_t mu; /* guards the listener list */
    struct {
        void (*fn)(void *, mf_param_t *);
        void *arg;
    } listeners[MAX_LISTENERS];
    int nlisteners;
};

_Static_assert(NPARAMS < 255 && NPARAMS * 2 < HASH_SLOTS, "params.c: HASH_SLOTS too small for the table");

/* FNV-1a of a parameter name. */
static uint32_t
name_hash(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

mf_params_t *
mf_params_new(void)
{
    mf_params_t *ps = mf_calloc(1, sizeof(*ps));
    for (size_t i = 0; i < NPARAMS; i++) {
        ps->tab[i] = defaults[i];
        atomic_store(&ps->tab[i].value, atomic_load(&defaults[i].value));
        ps->tab[i].owner = ps;
        uint32_t h = name_hash(defaults[i].name) & (HASH_SLOTS - 1);
        while (ps->slot[h] != 0)
            h = (h + 1) & (HASH_SLOTS - 1);
        ps->slot[h] = (uint8_t)(i + 1);
    }
    pthread_mutex_init(&ps->mu, NULL);
    return ps;
}

void
mf_params_free(mf_params_t *ps)
{
    if (ps == NULL)
        return;
    pthread_mutex_destroy(&ps->mu);
    free(ps);
}

mf_param_t *
mf_param_find(mf_params_t *ps, const char *name)
{
    for (uint32_t h = name_hash(name) & (HASH_SLOTS - 1); ps->slot[h] != 0; h = (h + 1) & (HASH_SLOTS - 1)) {
        mf_param_t *p = &ps->tab[ps->slot[h] - 1];
        if (strcmp(p->name, name) == 0)
            return p;
    }
    return NULL;
}

int64_t
mf_param_get(mf_params_t *ps, const char *name)
{
    mf_param_t *p = mf_param_find(ps, name);
    return p ? p->value : 0;
}

void
mf_param_on_change(mf_params_t *ps, void (*fn)(void *arg, mf_param_t *p), void *arg)
{
    pthread_mutex_lock(&ps->mu);
    if (ps->nlisteners < MAX_LISTENERS) {
        ps->listeners[ps->nlisteners].fn = fn;
        ps->listeners[ps->nlisteners].arg = arg;
        ps->nlisteners++;
    }
    pthread_mutex_unlock(&ps->mu);
}

/*
 * Numeric BSON values as parameters accept them (int, long, double,
 * decimal). Kept here rather than using query/value.h: common/ includes
 * nothing above it.
 */
static bool
is_number(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_INT32 || v->value_type == BSON_TYPE_INT64 ||
           v->value_type == BSON_TYPE_DOUBLE || v->value_type == BSON_TYPE_DECIMAL128;
}

static double
as_double(const bson_value_t *v)
{
    char buf[BSON_DECIMAL128_STRING];
    switch (v->value_type) {
    case BSON_TYPE_INT32:
        return v->value.v_int32;
    case BSON_TYPE_INT64:
        return (double)v->value.v_int64;
    case BSON_TYPE_DOUBLE:
        return v->value.v_double;
    case BSON_TYPE_DECIMAL128:
        bson_decimal128_to_string(&v->value.v_decimal128, buf);
        return strtod(buf, NULL);
    default:
        return 0;
    }
}

static int
set_int(mf_param_t *p, int64_t v, mf_error_t *err)
{
    if (p->min_exclusive ? v <= p->min : v < p->min)
        return mf_err_set(err, MF_E_BadValue, "Invalid value for parameter %s: %lld is not %s %lld", p->name,
                          (long long)v, p->min_exclusive ? "greater than" : "greater than or equal to",
                          (long long)p->min);
    if (v > p->max)
        return mf_err_set(err, MF_E_BadValue, "Invalid value for parameter %s: %lld is not less than or equal to %lld",
                          p->name, (long long)v, (long long)p->max);
    mf_params_t *ps = p->owner;
    p->value = v;
    pthread_mutex_lock(&ps->mu);
    int n = ps->nlisteners;
    pthread_mutex_unlock(&ps->mu);
    for (int i = 0; i < n; i++) /* entries below n never change once added */
        ps->listeners[i].fn(ps->listeners[i].arg, p);
    return 0;
}

int
mf_param_set_value(mf_param_t *p, const bson_value_t *v, bool at_startup, mf_error_t *err)
{
    /* mongod's set_parameter.cpp wording for the running server's case. */
    if (!at_startup && !p->runtime)
        return mf_err_set(err, MF_E_IllegalOperation, "not allowed to change [%s] at runtime", p->name);
    if (at_startup && !p->startup)
        return mf_err_set(err, MF_E_IllegalOperation, "not allowed to change parameter %s at startup", p->name);
    if (p->type == MF_PARAM_BOOL) {
        /* mongod's coerce<bool>: any value, as its trueValue() (a string, even "false", is true). */
        if (v->value_type == BSON_TYPE_BOOL)
            return set_int(p, v->value.v_bool, err);
        if (is_number(v))
            return set_int(p, as_double(v) != 0, err);
        return set_int(p, v->value_type != BSON_TYPE_NULL && v->value_type != BSON_TYPE_UNDEFINED, err);
    }
    if (p->type == MF_PARAM_INT) {
        int64_t iv;
        if (!is_number(v)) {
            /* mongod's coerce<int> failing: the element as its toString shows it, name and value. */
            char shown[200];
            mf_fmt_value(v, shown, sizeof(shown));
            return mf_err_set(err, MF_E_BadValue, "Invalid value for parameter %s: %s: %s", p->name, p->name, shown);
        }
        double d = as_double(v);
        if (d != d || d > 9.2e18 || d < -9.2e18)
            return mf_err_set(err, MF_E_BadValue, "Invalid value for parameter %s: out of range", p->name);
        iv = v->value_type == BSON_TYPE_INT64 ? v->value.v_int64 : (int64_t)d;
        return set_int(p, iv, err);
    }
    return mf_err_set(err, MF_E_IllegalOperation, "parameter %s is read-only", p->name);
}

int
mf_param_set_string(mf_params_t *ps, const char *assignment, mf_error_t *err)
{
    char name[128];
    const char *eq = strchr(assignment, '=');
    if (eq == NULL || (size_t)(eq - assignment) >= sizeof(name))
        return mf_err_set(err, MF_E_BadValue, "Illegal --setParameter parameter: \"%s\"", assignment);
    memcpy(name, assignment, (size_t)(eq - assignment));
    name[eq - assignment] = '\0';
    mf_param_t *p = mf_param_find(ps, name);
    if (p == NULL)
        return mf_err_set(err, MF_E_NoSuchKey, "Unknown --setParameter '%s'", name);
    const char *val = eq + 1;
    bson_value_t v;
    if (p->type == MF_PARAM_BOOL) {
        v.value_type = BSON_TYPE_BOOL;
        if (strcasecmp(val, "true") == 0 || strcmp(val, "1") == 0)
            v.value.v_bool = true;
        else if (strcasecmp(val, "false") == 0 || strcmp(val, "0") == 0)
            v.value.v_bool = false;
        else
            return mf_err_set(err, MF_E_BadValue, "Invalid value for parameter %s: '%s'", name, val);
    } else {
        char *end;
        v.value_type = BSON_TYPE_INT64;
        v.value.v_int64 = strtoll(val, &end, 10);
        if (*val == '\0' || *end != '\0')
            return mf_err_set(err, MF_E_BadValue, "Invalid value for parameter %s: '%s'", name, val);
    }
    return mf_param_set_value(p, &v, true, err);
}

void
mf_param_append(bson_t *doc, const mf_param_t *p)
{
    switch (p->type) {
    case MF_PARAM_BOOL:
        BSON_APPEND_BOOL(doc, p->name, p->value != 0);
        break;
    case MF_PARAM_INT:
        if (p->value >= INT32_MIN && p->value <= INT32_MAX)
            BSON_APPEND_INT32(doc, p->name, (int32_t)p->value);
        else
            BSON_APPEND_INT64(doc, p->name, p->value);
        break;
    case MF_PARAM_STRING:
        if (strcmp(p->name, "featureCompatibilityVersion") == 0) {
            bson_t sub;
            BSON_APPEND_DOCUMENT_BEGIN(doc, p->name, &sub);
            BSON_APPEND_UTF8(&sub, "version", p->svalue);
            bson_append_document_end(doc, &sub);
        } else if (strcmp(p->name, "authenticationMechanisms") == 0) {
            /* A list in mongod (std::vector<std::string>): an array, not the comma-separated setting. */
            bson_t arr;
            char key[16];
            const char *k, *at = p->svalue;
            uint32_t i = 0;
            BSON_APPEND_ARRAY_BEGIN(doc, p->name, &arr);
            while (at != NULL && *at) {
                size_t n = strcspn(at, ",");
                bson_uint32_to_string(i++, &k, key, sizeof(key));
                bson_append_utf8(&arr, k, -1, at, (int)n);
                at += n + (at[n] == ',');
            }
            bson_append_array_end(doc, &arr);
        } else {
            BSON_APPEND_UTF8(doc, p->name, p->svalue);
        }
        break;
    }
}

void
mf_param_each(mf_params_t *ps, void (*fn)(void *arg, mf_param_t *p), void *arg)
{
    for (size_t i = 0; i < NPARAMS; i++)
        fn(arg, &ps->tab[i]);
}
