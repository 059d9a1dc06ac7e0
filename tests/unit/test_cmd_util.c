/*
 * test_cmd_util.c: the lookups every command makes, which are indexed
 * rather than scanned (issue 13, request latency):
 *   - mf_op_find / mf_op_has answer exactly as bson_iter_init_find /
 *     bson_has_field on op->cmd: the first of duplicate fields, nothing for
 *     a missing or differently cased name, past MF_OP_FIELDS fields too, and
 *     again after a handler swaps op->cmd (ts_redirect does);
 *   - mf_param_find finds every parameter by its exact name, and nothing
 *     for an unknown or differently cased one.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "common/alloc.h"
#include "common/params.h"
#include "unit_util.h"

#define json unit_json

/* mf_op_find agrees with bson_iter_init_find for name on cmd: presence, and the value's type and int64. */
static void
agrees(mf_op_t *op, const char *name)
{
    bson_iter_t a, b;
    bool fa = mf_op_find(op, name, &a);
    bool fb = bson_iter_init_find(&b, op->cmd, name);
    cr_assert_eq(fa, fb, "%s: mf_op_find %d, bson_iter_init_find %d", name, fa, fb);
    cr_assert_eq(mf_op_has(op, name), fb, "%s: mf_op_has", name);
    if (!fa)
        return;
    cr_assert_str_eq(bson_iter_key(&a), bson_iter_key(&b));
    cr_assert_eq(bson_iter_type(&a), bson_iter_type(&b), "%s: type", name);
    cr_assert_eq(bson_iter_offset(&a), bson_iter_offset(&b), "%s: offset", name);
    if (BSON_ITER_HOLDS_NUMBER(&a))
        cr_assert_eq(bson_iter_as_int64(&a), bson_iter_as_int64(&b), "%s: value", name);
    /* The iterator goes on to the following fields as bson_iter_init_find's does. */
    while (bson_iter_next(&b))
        cr_assert(bson_iter_next(&a) && strcmp(bson_iter_key(&a), bson_iter_key(&b)) == 0);
    cr_assert_not(bson_iter_next(&a));
}

Test(op_find, same_answers_as_bson_iter_init_find)
{
    bson_t *cmd = json("{\"find\": \"c\", \"filter\": {\"a\": 1}, \"limit\": 5, \"limit\": 7, \"Limit\": 9,"
                       " \"singleBatch\": true, \"\": 3, \"$db\": \"test\"}");
    mf_op_t op;
    memset(&op, 0, sizeof(op));
    op.cmd = cmd;
    const char *names[] = {"find", "filter", "limit", "Limit", "LIMIT", "singleBatch", "", "$db", "lsid", "a", "lim"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        agrees(&op, names[i]);
    bson_iter_t it;
    cr_assert(mf_op_find(&op, "limit", &it) && bson_iter_as_int64(&it) == 5, "the first of two 'limit' fields");
    bson_destroy(cmd);
}

Test(op_find, more_fields_than_the_index_holds)
{
    char buf[4096];
    size_t n = (size_t)snprintf(buf, sizeof(buf), "{\"insert\": \"c\"");
    for (int i = 0; i < MF_OP_FIELDS + 8; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, ", \"f%d\": %d", i, i);
    snprintf(buf + n, sizeof(buf) - n, "}");
    bson_t *cmd = json(buf);
    mf_op_t op;
    memset(&op, 0, sizeof(op));
    op.cmd = cmd;
    char name[16];
    for (int i = 0; i < MF_OP_FIELDS + 8; i++) {
        snprintf(name, sizeof(name), "f%d", i);
        agrees(&op, name);
    }
    agrees(&op, "insert");
    agrees(&op, "missing");
    bson_destroy(cmd);
}

Test(op_find, a_swapped_command_is_indexed_again)
{
    bson_t *a = json("{\"count\": \"c\", \"query\": {\"x\": 1}, \"skip\": 2}");
    bson_t *b = json("{\"aggregate\": \"c\", \"pipeline\": [], \"skip\": 4}");
    mf_op_t op;
    memset(&op, 0, sizeof(op));
    op.cmd = a;
    bson_iter_t it;
    cr_assert(mf_op_find(&op, "skip", &it) && bson_iter_as_int64(&it) == 2);
    op.cmd = b;
    cr_assert(mf_op_find(&op, "skip", &it) && bson_iter_as_int64(&it) == 4);
    cr_assert_not(mf_op_has(&op, "query"));
    cr_assert(mf_op_has(&op, "pipeline"));
    op.cmd = a;
    cr_assert(mf_op_has(&op, "query"));
    agrees(&op, "skip");
    /* The same bson_t rewritten in place (another length) is not taken for the old one. */
    bson_t c;
    bson_init(&c);
    BSON_APPEND_INT32(&c, "skip", 8);
    op.cmd = &c;
    cr_assert(mf_op_find(&op, "skip", &it) && bson_iter_as_int64(&it) == 8);
    BSON_APPEND_INT32(&c, "limit", 1);
    cr_assert(mf_op_has(&op, "limit"));
    agrees(&op, "limit");
    bson_destroy(&c);
    bson_destroy(a);
    bson_destroy(b);
}

typedef struct {
    mf_params_t *ps;
    int n;
} each_t;

static void
check_found(void *arg, mf_param_t *p)
{
    each_t *e = arg;
    mf_params_t *ps = e->ps;
    e->n++;
    cr_assert_eq(mf_param_find(ps, p->name), p, "mf_param_find(%s)", p->name);
    char upper[128];
    mf_strlcpy(upper, p->name, sizeof(upper));
    upper[0] = (char)(upper[0] >= 'a' && upper[0] <= 'z' ? upper[0] - 'a' + 'A' : upper[0] + 1);
    cr_assert_null(mf_param_find(ps, upper), "mf_param_find(%s) is case-sensitive", upper);
}

Test(params, every_parameter_found_by_its_exact_name)
{
    mf_params_t *ps = mf_params_new();
    each_t e = {ps, 0};
    mf_param_each(ps, check_found, &e);
    cr_assert_gt(e.n, 30, "the table's parameters were all looked up (%d)", e.n);
    cr_assert_eq(mf_param_get(ps, "ttlMonitorSleepSecs"), 60);
    cr_assert_null(mf_param_find(ps, "ttlMonitorSleepSec"));
    cr_assert_null(mf_param_find(ps, "ttlMonitorSleepSecsX"));
    cr_assert_null(mf_param_find(ps, ""));
    cr_assert_null(mf_param_find(ps, "noSuchParameter"));
    cr_assert_eq(mf_param_get(ps, "noSuchParameter"), 0);
    mf_params_free(ps);
}

/* mf_strlcpy and mf_strjoin cut between UTF-8 characters: a cut name stays valid UTF-8 (profile entries, currentOp). */
Test(strings, a_cut_copy_or_join_ends_between_utf8_characters)
{
    char buf[6];
    cr_assert_eq(mf_strlcpy(buf, "ab\xc3\xa9\xc3\xa9", sizeof(buf)), 6); /* "abéé": the cut falls inside the second é */
    cr_assert_str_eq(buf, "ab\xc3\xa9");
    cr_assert_eq(mf_strlcpy(buf, "abcdefg", sizeof(buf)), 7);
    cr_assert_str_eq(buf, "abcde", "ASCII is cut at size - 1, as before");
    cr_assert_eq(mf_strlcpy(buf, "\xe2\x82\xac\xe2\x82\xac", sizeof(buf)), 6); /* "€€": three bytes each */
    cr_assert_str_eq(buf, "\xe2\x82\xac");
    char ns[8];
    cr_assert_eq(mf_strjoin(ns, sizeof(ns), "db", ".", "x\xc3\xa9\xc3\xa9"), 8); /* "db.xéé" cut inside the second é */
    cr_assert_str_eq(ns, "db.x\xc3\xa9");
    cr_assert_eq(mf_strjoin(ns, sizeof(ns), "db", ".", "c"), 4);
    cr_assert_str_eq(ns, "db.c");
}

/* An error message cut by its buffer ends between UTF-8 characters: the reply's errmsg must be valid UTF-8 (a driver cannot decode it otherwise). */
Test(strings, a_cut_error_message_ends_between_utf8_characters)
{
    char name[sizeof(((mf_error_t *)0)->msg) * 2 + 16]; /* longer than any message: the cut always falls in it */
    size_t n = 0;
    for (size_t i = 0; i < sizeof(((mf_error_t *)0)->msg); i++) {
        name[n++] = '\xc3';
        name[n++] = '\xa9'; /* é */
    }
    name[n] = '\0';
    for (int shift = 0; shift < 4; shift++) {
        mf_error_t err;
        mf_err_set(&err, MF_E_CommandNotFound, "%.*sno such command: '%s'", shift, "xyz", name);
        size_t len = strlen(err.msg);
        cr_assert_lt(len, sizeof(err.msg));
        cr_assert_geq(len, sizeof(err.msg) - 4);
        /* every é whole: the message after the prefix alternates c3 a9 to its end */
        const char *p = strchr(err.msg, '\'') + 1;
        cr_assert_eq((size_t)(err.msg + len - p) % 2, 0, "shift %d: a cut é left behind", shift);
        cr_assert_eq((unsigned char)err.msg[len - 1], 0xa9);
    }
    char s[8] = "ab\xe2\x82";
    cr_assert_eq(mf_utf8_cut_tail(s, 4), 2, "a three-byte character with one byte missing goes");
    char t[8] = "ab\xe2\x82\xac";
    cr_assert_eq(mf_utf8_cut_tail(t, 5), 5, "a whole one stays");
}

/* mf_utf8_scrub: bytes that are not UTF-8 become '?', whole characters stay; an error message is always decodable. */
Test(strings, scrub_replaces_bytes_that_are_not_utf8)
{
    char s[32] = "a\xc3\xa9" "b\xc3" "c\xff\xe2\x82\xac\xed\xa0\x80";
    mf_utf8_scrub(s);
    cr_assert_str_eq(s, "a\xc3\xa9" "b?c?\xe2\x82\xac???", "a cut é, 0xff and a surrogate replaced; é and € kept");
    mf_error_t err;
    mf_err_set(&err, MF_E_BadValue, "value '%s'", "x\xc3");
    cr_assert_str_eq(err.msg, "value 'x?'");
}
