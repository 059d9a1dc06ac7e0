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
 * mf_log_recent: copies up to max of the most recent lines (oldest first)
 * into out (each malloc'd; caller frees each). Returns how many. Also
 * returns the total number of lines logged since start in *total.
 */
int mf_log_recent(char **out, int max, long *total);

#endif /* MF_LOG_H */
