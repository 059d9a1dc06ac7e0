/*
 * rx.c: bounded PCRE2 matches (see rx.h).
 */
#include "doc/rx.h"

pcre2_match_context *
mf_rx_context(void)
{
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    if (mc != NULL) {
        pcre2_set_match_limit(mc, MF_RX_MATCH_LIMIT);
        pcre2_set_heap_limit(mc, MF_RX_HEAP_KB);
    }
    return mc;
}

int
mf_rx_match(const pcre2_code *re, const pcre2_match_context *mc, const char *s, size_t len, int *pcre_rc)
{
    pcre2_match_context *own = mc == NULL ? mf_rx_context() : NULL;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = PCRE2_ERROR_NOMEMORY;
    if ((mc != NULL || own != NULL) && md != NULL)
        rc = pcre2_match(re, (PCRE2_SPTR)s, len, 0, 0, md, mc != NULL ? (pcre2_match_context *)mc : own);
    pcre2_match_data_free(md);
    pcre2_match_context_free(own);
    if (pcre_rc != NULL)
        *pcre_rc = rc;
    if (rc >= 0)
        return 1;
    return rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}
