/*
 * test_sessions.c: the logical session cache (engine/sessions.h) with a
 * controlled clock: lastUse refresh, lazy expiry (a touch drops at most two
 * expired sessions, a listing skips and drops the rest), the maxSessions
 * limit (261) and removal by id, by user and of everything.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "engine/sessions.h"

#define MIN_MS 60000

static void
id_of(int n, uint8_t id[16])
{
    memset(id, 0, 16);
    memcpy(id, &n, sizeof(n));
    id[6] = 0x40;
}

static void
count_cb(void *arg, const mf_session_info_t *info)
{
    (*(int *)arg)++;
    cr_assert(info->last_use_ms > 0);
}

static int
listed(mf_sessions_t *s, int64_t now, const uint8_t (*uids)[MF_SESSION_UID_LEN], size_t n)
{
    int c = 0;
    mf_sessions_each(s, now, 30 * MIN_MS, uids, n, count_cb, &c);
    return c;
}

Test(sessions, uid_is_sha256_of_the_user_name)
{
    uint8_t uid[MF_SESSION_UID_LEN];
    mf_session_uid("", uid);
    /* SHA-256("") = e3b0c442... */
    cr_assert_eq(uid[0], 0xe3, "uid[0] = %02x", uid[0]);
    cr_assert_eq(uid[1], 0xb0, "uid[1] = %02x", uid[1]);
    cr_assert_eq(uid[31], 0x55, "uid[31] = %02x", uid[31]);
}

Test(sessions, touch_list_and_lazy_expiry)
{
    mf_sessions_t *s = mf_sessions_new(100);
    mf_error_t err = {0};
    uint8_t id[16];
    int64_t t0 = 1000000;
    for (int i = 0; i < 10; i++) {
        id_of(i, id);
        cr_assert_eq(mf_sessions_touch(s, id, "", t0 + i, 30 * MIN_MS, &err), 0);
    }
    cr_assert_eq(mf_sessions_count(s), 10);
    id_of(3, id);
    cr_assert_eq(mf_sessions_touch(s, id, "", t0 + 20 * MIN_MS, 30 * MIN_MS, &err), 0, "refresh session 3");
    cr_assert_eq(mf_sessions_count(s), 10, "a refresh adds nothing");
    /* 31 minutes on: all but session 3 expired; one new touch drops at most two. */
    int64_t later = t0 + 31 * MIN_MS;
    id_of(100, id);
    cr_assert_eq(mf_sessions_touch(s, id, "", later, 30 * MIN_MS, &err), 0);
    cr_assert_eq(mf_sessions_count(s), 9, "11 cached, 2 dropped: %zu", mf_sessions_count(s));
    cr_assert_eq(listed(s, later, NULL, 0), 2, "sessions 3 and 100 are live");
    cr_assert_eq(mf_sessions_count(s), 2, "the listing dropped the expired ones");
    mf_sessions_free(s);
}

Test(sessions, limit_is_261_and_removal_frees_room)
{
    mf_sessions_t *s = mf_sessions_new(3);
    mf_error_t err = {0};
    uint8_t id[16], uid[MF_SESSION_UID_LEN];
    for (int i = 0; i < 3; i++) {
        id_of(i, id);
        cr_assert_eq(mf_sessions_touch(s, id, i == 2 ? "app@admin" : "", 5000, 30 * MIN_MS, &err), 0);
    }
    id_of(9, id);
    cr_assert_eq(mf_sessions_touch(s, id, "", 5000, 30 * MIN_MS, &err), -1);
    cr_assert_eq(err.code, 261, "code %d", err.code);
    id_of(1, id);
    cr_assert_eq(mf_sessions_touch(s, id, "", 6000, 30 * MIN_MS, &err), 0, "a known session still refreshes");
    mf_session_uid("app@admin", uid);
    cr_assert_eq(listed(s, 6000, (const uint8_t(*)[MF_SESSION_UID_LEN])uid, 1), 1);
    id_of(2, id);
    cr_assert(!mf_sessions_end(s, id, (uint8_t[MF_SESSION_UID_LEN]){0}), "another user's key does not match");
    cr_assert(mf_sessions_end(s, id, uid));
    id_of(9, id);
    cr_assert_eq(mf_sessions_touch(s, id, "", 7000, 30 * MIN_MS, &err), 0, "room again");
    mf_session_uid("", uid);
    cr_assert_eq(mf_sessions_end_all(s, uid), 3);
    cr_assert_eq(mf_sessions_count(s), 0);
    mf_sessions_free(s);
}

Test(sessions, many_sessions_grow_the_table)
{
    mf_sessions_t *s = mf_sessions_new(1000000);
    mf_error_t err = {0};
    uint8_t id[16];
    for (int i = 0; i < 20000; i++) {
        id_of(i, id);
        cr_assert_eq(mf_sessions_touch(s, id, "", 10000 + i, 30 * MIN_MS, &err), 0);
    }
    for (int i = 0; i < 20000; i += 2) {
        id_of(i, id);
        cr_assert_eq(mf_sessions_touch(s, id, "", 50000, 30 * MIN_MS, &err), 0);
    }
    cr_assert_eq(mf_sessions_count(s), 20000);
    cr_assert_eq(mf_sessions_end_all(s, NULL), 20000);
    mf_sessions_free(s);
}
