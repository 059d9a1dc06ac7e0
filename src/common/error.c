/*
 * error.c: the error object and the code-name table (see error.h).
 *
 * Code names come straight from the X-macro table. Names that end in a digit
 * run ("CannotCreateIndex67", "TypeMismatch16554") exist only to keep enum
 * names unique; they map back to MongoDB's real name here.
 */
#include "common/error.h"

#include "common/alloc.h"

#include <stdio.h>
#include <string.h>

int
mf_err_vset(mf_error_t *err, int code, const char *fmt, va_list ap)
{
    if (err == NULL)
        return -1;
    err->code = code;
    err->info_len = 0;
    err->planning = false;
    err->optimizing = false;
    int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    if (n >= (int)sizeof(err->msg)) /* cut: not inside a character, as the reply's errmsg must be valid UTF-8 */
        (void)mf_utf8_cut_tail(err->msg, sizeof(err->msg) - 1);
    mf_utf8_scrub(err->msg); /* and what it quotes, cut elsewhere or never UTF-8, as '?' */
    return -1;
}

int
mf_err_set(mf_error_t *err, int code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    mf_err_vset(err, code, fmt, ap);
    va_end(ap);
    return -1;
}

int
mf_err_write_conflict(mf_error_t *err)
{
    return mf_err_set(err, MF_E_WriteConflict, "WriteConflict error: this operation conflicted with another operation. "
                                                "Please retry your operation or multi-document transaction.");
}

void
mf_err_clear(mf_error_t *err)
{
    if (err == NULL)
        return;
    err->code = 0;
    err->msg[0] = '\0';
    err->info_len = 0;
    err->planning = false;
    err->optimizing = false;
}

int
mf_err_planning(mf_error_t *err)
{
    if (err != NULL)
        err->planning = true;
    return -1;
}

int
mf_err_optimizing(mf_error_t *err)
{
    if (err != NULL)
        err->optimizing = true;
    return -1;
}

void
mf_err_set_info(mf_error_t *err, const uint8_t *doc, uint32_t len)
{
    if (err == NULL || len > sizeof(err->info))
        return;
    memcpy(err->info, doc, len);
    err->info_len = len;
}

int
mf_err_context(mf_error_t *err, const char *context)
{
    if (err->planning)
        return -1;
    char msg[sizeof(err->msg)];
    uint8_t info[sizeof(err->info)];
    uint32_t info_len = err->info_len;
    memcpy(msg, err->msg, sizeof(msg));
    memcpy(info, err->info, info_len);
    mf_err_set(err, err->code, "%s :: caused by :: %s", context, msg);
    mf_err_set_info(err, info, info_len);
    return -1;
}

bool
mf_err_is_interruption(int code)
{
    switch (code) {
    case 24:    /* LockTimeout */
    case 50:    /* MaxTimeMSExpired */
    case 237:   /* CursorKilled */
    case 262:   /* ExceededTimeLimit */
    case 279:   /* ClientDisconnect */
    case 11600: /* InterruptedAtShutdown */
    case 11601: /* Interrupted */
    case 11602: /* InterruptedDueToReplStateChange */
    case 46841: /* ClientMarkedKilled */
        return true;
    default:
        return false;
    }
}

const char *
mf_err_codename(int code)
{
    /* Enum names made unique by a numeric suffix map back to MongoDB's names. */
    if (code == MF_E_TypeMismatch16554)
        return "TypeMismatch";
    switch (code) {
    case 0:
        return "OK";
#define MF_X_CASE(c, name)                                                     \
    case c:                                                                    \
        return #name;
        MF_ERROR_CODES(MF_X_CASE)
#undef MF_X_CASE
    default:
        return "UnknownError";
    }
}
