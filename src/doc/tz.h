/*
 * tz.h: time zones for the date expressions ($dateToParts, $hour, $dateTrunc...).
 *
 * A zone is either a fixed UTC offset ("+05:30", "-0800", "+03", as MongoDB's
 * parseUtcOffset accepts) or an Olson name ("Europe/Paris", "UTC") whose
 * rules are read from the system's compiled tz database
 * (/usr/share/zoneinfo, Debian package tzdata; TZif files, RFC 8536).
 *
 * Design. The C library's way (setenv TZ + tzset + localtime_r) mutates
 * process state and is not thread-safe, and the server evaluates
 * expressions on several threads. So the TZif file is parsed here into an
 * immutable mf_tz_t: its transition table (64-bit section) and its POSIX TZ
 * footer rule for instants after the last transition. A zone, once opened,
 * is only read, so threads may share it. Names are checked before any file
 * is opened (letters, digits, '_', '-', '+', '/'; no "..", no leading '/').
 */
#ifndef MF_TZ_H
#define MF_TZ_H

#include <stdbool.h>
#include <stdint.h>

typedef struct mf_tz mf_tz_t;

/*
 * The proleptic Gregorian calendar (H. Hinnant's algorithms), shared by the
 * date expressions, $setWindowFields' date ranges and the zone rules:
 * mf_days_from_civil gives the days since 1970-01-01 of y-m-d (m 1-12, d
 * 1-31); mf_civil_from_days is its inverse.
 */
int64_t mf_days_from_civil(int64_t y, int64_t m, int64_t d);
void mf_civil_from_days(int64_t z, int64_t *y, int64_t *m, int64_t *d);

/*
 * Date arithmetic in UTC that saturates at the int64 range instead of
 * overflowing (a date may be any int64 of milliseconds), shared by
 * $setWindowFields' date ranges and $densify's steps: mf_sat_add /
 * mf_sat_mul on int64; mf_utc_add_months adds months to ms as $dateAdd does
 * in UTC (the day clamped to the new month's last day, the time of day kept).
 */
int64_t mf_sat_add(int64_t a, int64_t b);
int64_t mf_sat_mul(int64_t a, int64_t b);
int64_t mf_utc_add_months(int64_t ms, int64_t months);

/*
 * mf_tz_open: the zone named name, or NULL if there is no such zone. Names are
 * MongoDB's: a fixed offset, "UTC", or a Zone or Link of the IANA tz source,
 * as timelib's built-in database has them; other files under
 * /usr/share/zoneinfo ("localtime", "posix/...", "right/...") are not zones.
 */
mf_tz_t *mf_tz_open(const char *name);
void mf_tz_free(mf_tz_t *z);

/* mf_tz_is_utc: true for the zone of UTC without a name (NULL) or a zero fixed offset. */
bool mf_tz_is_utc(const mf_tz_t *z);

/* mf_tz_offset: seconds east of UTC in force at t (seconds since the epoch, UTC); 0 for NULL. */
int32_t mf_tz_offset(const mf_tz_t *z, int64_t t);

/*
 * mf_tz_local_to_utc: the UTC instant (seconds) of local wall time local
 * (seconds since the epoch as if the wall clock were UTC). An ambiguous time
 * (clocks set back) takes the earlier instant; a time in a gap (clocks set
 * forward) is moved forward by the gap, as timelib does.
 */
int64_t mf_tz_local_to_utc(const mf_tz_t *z, int64_t local);

#endif /* MF_TZ_H */
