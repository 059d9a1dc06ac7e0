/*
 * rx.h: one bounded PCRE2 match, shared by the matcher ($regex), the
 * expressions ($regexMatch and friends) and $jsonSchema's pattern.
 *
 * A catastrophic pattern ((a+)+$ on a long run of a's) backtracks
 * exponentially; PCRE2's defaults let one match run for seconds and use
 * 20 MB. Here every match gets a budget (MF_RX_MATCH_LIMIT backtracking
 * steps, MF_RX_HEAP_KB of backtracking memory): past it the match gives up
 * in milliseconds, and the caller decides what that means (no match for a
 * filter, as mongod; an error for an expression). A command's documents
 * are matched one at a time, with interruption (maxTimeMS, killOp) checked
 * between them, so no request can pin a core for longer than its limit.
 */
#ifndef MF_RX_H
#define MF_RX_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>

#define MF_RX_MATCH_LIMIT 1000000u
#define MF_RX_HEAP_KB 8192u

/*
 * mf_rx_context: a match context holding the budget (NULL only when out of
 * memory), for a pattern used many times; the caller frees it with
 * pcre2_match_context_free. Matching only reads it, so threads may share it.
 */
pcre2_match_context *mf_rx_context(void);

/*
 * mf_rx_match: matches s (len bytes) against re within the budget of mc
 * (NULL: a context made for this one match). Returns 1 (match), 0 (no
 * match), or -1 when the budget ran out or PCRE2 failed (its error code in
 * *pcre_rc when not NULL).
 */
int mf_rx_match(const pcre2_code *re, const pcre2_match_context *mc, const char *s, size_t len, int *pcre_rc);

#endif /* MF_RX_H */
