/*
 * ttl_spec.c: validation of expireAfterSeconds in index specs (SPEC A2-A4).
 * Filled in by the TTL issue; until then only the shape checks run.
 */
#include "ttl/ttl.h"

int
mf_ttl_normalise_spec(const bson_t *spec, bson_t *out, mf_error_t *err)
{
    (void)err;
    bson_copy_to(spec, out);
    return 0;
}

void
mf_ttl_notify(void)
{
}
