/*
 * compressor.c: the compressor name / id table of compressor.h and the
 * --networkMessageCompressors list. Nothing here compresses.
 */
#include "common/compressor.h"

#include <string.h>

static const char *const names[MF_COMPRESSOR_COUNT] = {"noop", "snappy", "zlib", "zstd"};

const char *
mf_compressor_name(int id)
{
    return id >= 0 && id < MF_COMPRESSOR_COUNT ? names[id] : NULL;
}

int
mf_compressor_id(const char *name, size_t len)
{
    for (int i = 0; i < MF_COMPRESSOR_COUNT; i++) {
        if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
            return i;
    }
    return -1;
}

bool
mf_compressor_list_has(const mf_compressor_list_t *list, int id)
{
    for (uint8_t i = 0; i < list->n; i++) {
        if (list->ids[i] == id)
            return true;
    }
    return false;
}

int
mf_compressor_list_parse(const char *spec, mf_compressor_list_t *list, mf_error_t *err)
{
    list->n = 0;
    if (strcmp(spec, "disabled") == 0)
        return 0;
    for (const char *p = spec; *p != '\0';) {
        size_t len = strcspn(p, ", ");
        if (len > 0) {
            int id = mf_compressor_id(p, len);
            if (id < 0)
                return mf_err_set(err, MF_E_BadValue, "Invalid network message compressor specified in configuration: %.*s",
                                  (int)len, p);
            if (!mf_compressor_list_has(list, id))
                list->ids[list->n++] = (uint8_t)id;
        }
        p += len;
        if (*p != '\0')
            p++;
    }
    return 0;
}
