/*
 * log.h: one JSON line per event on stderr, in the shape mongod uses
 * ({"t":{"$date":...},"s":"I","c":"NETWORK","id":N,"ctx":"conn3","msg":"...","attr":{...}}).
 *
 * Lines are written with one write(2) each, so threads never interleave
 * within a line. The attr part is preformatted JSON supplied by the caller
 * (may be NULL).
 */
#ifndef MF_LOG_H
#define MF_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/clock.h"

/* Severity letters as mongod prints them. */
#define MF_LOG_INFO 'I'
#define MF_LOG_WARN 'W'
#define MF_LOG_ERROR 'E'
#define MF_LOG_DEBUG 'D'

/*
 * mf_log: writes one line. component is "NETWORK", "STORAGE", "COMMAND",
 * "INDEX", "TTL", "CONTROL"...; fmt builds the message; the message is JSON-
 * escaped. Also kept in a small ring for the getLog command.
 */
void mf_log(char severity, const char *component, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * mf_log_attr: writes one line with mongod's id, ctx and attr fields
 * ({"t":..,"s":..,"c":..,"id":id,"ctx":ctx,"msg":msg,"attr":attr_json}).
 * msg is JSON-escaped; attr_json must be a JSON object (NULL: none). Kept
 * in the ring like mf_log's lines.
 */
void mf_log_attr(char severity, const char *component, int id, const char *ctx, const char *msg, const char *attr_json);

/*
 * mf_log_recent: copies up to max of the most recent lines (oldest first)
 * into out (each malloc'd; caller frees each). Returns how many. Also
 * returns the total number of lines logged since start in *total.
 */
int mf_log_recent(char **out, int max, long *total);

/*
 * mf_log_due: whether a line logged at most once per period_ms is due now;
 * *last_ms is the monotonic time it was last logged (0: never), updated
 * when this returns true. Not atomic: each *last_ms belongs to one thread.
 */
static inline bool
mf_log_due(int64_t *last_ms, int64_t period_ms)
{
    int64_t now = mf_mono_ms();
    if (*last_ms != 0 && now - *last_ms < period_ms)
        return false;
    *last_ms = now;
    return true;
}

#endif /* MF_LOG_H */
