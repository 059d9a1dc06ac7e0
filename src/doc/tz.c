/*
 * tz.c: time zones from fixed offsets and from the compiled tz database.
 *
 * See tz.h for the design. A TZif file holds a table of transitions (UTC
 * instants) each naming a local time type (an offset from UTC); before the
 * first transition type 0 applies; after the last one the POSIX TZ string of
 * the footer ("EST5EDT,M3.2.0,M11.1.0") gives the rule, parsed here into a
 * standard offset, an optional daylight offset and the two yearly change
 * dates. Only version 2+ files (64-bit times) are read; Debian's are.
 */
#include "doc/tz.h"
#include "common/alloc.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TZ_DIR "/usr/share/zoneinfo/"
#define TZ_MAX_FILE (1 << 20)

/* A POSIX TZ rule date: kind 'M' (month m, week w, day d), 'J' (Julian 1..365, no Feb 29), 'N' (0..365). */
typedef struct rule_date {
    char kind;
    int m, w, d, n;
    int32_t secs; /* local time of day of the change, may be negative or past 24h */
} rule_date_t;

struct mf_tz {
    bool fixed;
    int32_t fixed_off;
    /* TZif */
    size_t n;
    int64_t *at;
    int32_t *off; /* offset in force from at[i] on */
    int32_t first_off;
    /* footer rule */
    bool has_rule, has_dst;
    int32_t std_off, dst_off;
    rule_date_t start, end;
};

static int64_t
fdiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0)))
        q--;
    return q;
}

int64_t
mf_days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t
mf_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t
mf_sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
    return r;
}

int64_t
mf_utc_add_months(int64_t ms, int64_t months)
{
    if (months > (INT64_C(1) << 40) || months < -(INT64_C(1) << 40))
        return months > 0 ? INT64_MAX : INT64_MIN; /* past any year a date can hold */
    int64_t days = ms / 86400000 - (ms < 0 && ms % 86400000 != 0); /* floor, without negating ms */
    int64_t tod = ms % 86400000 < 0 ? ms % 86400000 + 86400000 : ms % 86400000; /* days * 86400000 may overflow */
    int64_t y, m, d;
    mf_civil_from_days(days, &y, &m, &d);
    int64_t total = y * 12 + (m - 1) + months;
    int64_t ny = total >= 0 ? total / 12 : -((-total + 11) / 12);
    int64_t nm = total - ny * 12 + 1;
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t maxd = mdays[nm - 1] + (nm == 2 && ((ny % 4 == 0 && ny % 100 != 0) || ny % 400 == 0));
    return mf_sat_add(mf_sat_mul(mf_days_from_civil(ny, nm, d > maxd ? maxd : d), 86400000), tod);
}

void
mf_civil_from_days(int64_t z, int64_t *y, int64_t *m, int64_t *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp + (mp < 10 ? 3 : -9);
    *y = yoe + era * 400 + (*m <= 2);
}


static bool
leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int
mdays(int64_t y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap(y) ? 29 : d[m - 1];
}

/* year of the local day count days */
static int64_t
year_of_days(int64_t z)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    return yoe + era * 400 + (m <= 2);
}

/* ---- POSIX TZ string ---- */

static const char *
skip_name(const char *p)
{
    if (*p == '<') {
        while (*p && *p != '>')
            p++;
        return *p ? p + 1 : NULL;
    }
    const char *s = p;
    while (isalpha((unsigned char)*p))
        p++;
    return p - s >= 3 ? p : NULL;
}

/* parse_hms: [+-]h[:mm[:ss]] → seconds. */
static const char *
parse_hms(const char *p, int32_t *out)
{
    int sign = 1, h = 0, m = 0, s = 0;
    if (*p == '+' || *p == '-')
        sign = *p++ == '-' ? -1 : 1;
    if (!isdigit((unsigned char)*p))
        return NULL;
    while (isdigit((unsigned char)*p))
        h = h * 10 + (*p++ - '0');
    if (*p == ':') {
        p++;
        while (isdigit((unsigned char)*p))
            m = m * 10 + (*p++ - '0');
        if (*p == ':') {
            p++;
            while (isdigit((unsigned char)*p))
                s = s * 10 + (*p++ - '0');
        }
    }
    *out = sign * (h * 3600 + m * 60 + s);
    return p;
}

static const char *
parse_rule_date(const char *p, rule_date_t *r)
{
    r->secs = 7200;
    if (*p == 'M') {
        r->kind = 'M';
        if (sscanf(p + 1, "%d.%d.%d", &r->m, &r->w, &r->d) != 3 || r->m < 1 || r->m > 12 || r->w < 1 ||
            r->w > 5 || r->d < 0 || r->d > 6)
            return NULL;
        p++;
        while (isdigit((unsigned char)*p) || *p == '.')
            p++;
    } else if (*p == 'J' || isdigit((unsigned char)*p)) {
        r->kind = *p == 'J' ? 'J' : 'N';
        if (*p == 'J')
            p++;
        r->n = 0;
        while (isdigit((unsigned char)*p))
            r->n = r->n * 10 + (*p++ - '0');
    } else {
        return NULL;
    }
    if (*p == '/') {
        p = parse_hms(p + 1, &r->secs);
        if (p == NULL)
            return NULL;
    }
    return p;
}

static bool
parse_posix(mf_tz_t *z, const char *s)
{
    const char *p = skip_name(s);
    int32_t o;

    if (p == NULL || (p = parse_hms(p, &o)) == NULL)
        return false;
    z->std_off = -o;
    if (*p == '\0') {
        z->has_rule = true;
        return true;
    }
    if ((p = skip_name(p)) == NULL)
        return false;
    z->dst_off = z->std_off + 3600;
    if (*p && *p != ',') {
        if ((p = parse_hms(p, &o)) == NULL)
            return false;
        z->dst_off = -o;
    }
    if (*p != ',')
        return false; /* no rule given: not used by tzdata */
    if ((p = parse_rule_date(p + 1, &z->start)) == NULL || *p != ',')
        return false;
    if ((p = parse_rule_date(p + 1, &z->end)) == NULL || *p != '\0')
        return false;
    z->has_rule = z->has_dst = true;
    return true;
}

/* rule_local: local seconds (in the offset before the change) of rule date r in year y. */
static int64_t
rule_local(const rule_date_t *r, int64_t y)
{
    int64_t day;
    if (r->kind == 'M') {
        int64_t first = mf_days_from_civil(y, r->m, 1);
        int dow = (int)(((first + 4) % 7 + 7) % 7);
        int d = 1 + (r->d - dow + 7) % 7 + (r->w - 1) * 7;
        while (d > mdays(y, r->m))
            d -= 7;
        day = first + d - 1;
    } else if (r->kind == 'J') {
        day = mf_days_from_civil(y, 1, 1) + r->n - 1 + (leap(y) && r->n >= 60);
    } else {
        day = mf_days_from_civil(y, 1, 1) + r->n;
    }
    return day * 86400 + r->secs;
}

static int32_t
rule_offset(const mf_tz_t *z, int64_t t)
{
    if (!z->has_dst)
        return z->std_off;
    int64_t y = year_of_days(fdiv(t + z->std_off, 86400));
    int64_t start = rule_local(&z->start, y) - z->std_off;
    int64_t end = rule_local(&z->end, y) - z->dst_off;
    bool dst;
    if (start < end)
        dst = t >= start && t < end;
    else
        dst = !(t >= end && t < start);
    return dst ? z->dst_off : z->std_off;
}

/* ---- TZif ---- */

static uint32_t
be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t
be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

static bool
valid_name(const char *name)
{
    size_t l = strlen(name);
    if (l == 0 || l > 128 || name[0] == '/' || name[0] == '.' || strstr(name, "..") != NULL)
        return false;
    for (const char *p = name; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-' || *p == '+' || *p == '/'))
            return false;
    return true;
}

/*
 * known_zone: name is a zone MongoDB knows. mongod's TimeZoneDatabase
 * (date_time_support.cpp, loadTimeZoneInfo / getTimeZone) fills its map from
 * timelib's built-in database, compiled from the IANA tz source: every Zone
 * and Link, nothing else, so any other name is 40485 even where a file of that
 * name exists. Under /usr/share/zoneinfo the TZif files that are not Zones or
 * Links of that source (Debian 12's tzdata.zi lists them) are "localtime",
 * "posixrules" and the "posix/" and "right/" trees; the other extra files
 * (zone.tab, leapseconds, ...) are not TZif and fail to load anyway. Checked
 * by name rather than against tzdata.zi, which would be a process-wide list.
 */
static bool
known_zone(const char *name)
{
    return strcmp(name, "localtime") != 0 && strcmp(name, "posixrules") != 0 && strncmp(name, "posix/", 6) != 0 &&
           strncmp(name, "right/", 6) != 0;
}

static bool
load_tzif(mf_tz_t *z, const unsigned char *b, size_t len)
{
    size_t pos = 0;
    uint32_t cnt[6];

    if (len < 44 || memcmp(b, "TZif", 4) != 0 || b[4] < '2')
        return false;
    for (int i = 0; i < 6; i++)
        cnt[i] = be32(b + 20 + 4 * i);
    /* isutcnt isstdcnt leapcnt timecnt typecnt charcnt */
    pos = 44 + (size_t)cnt[3] * 5 + (size_t)cnt[4] * 6 + cnt[5] + (size_t)cnt[2] * 8 + cnt[1] + cnt[0];
    if (pos + 44 > len || memcmp(b + pos, "TZif", 4) != 0)
        return false;
    for (int i = 0; i < 6; i++)
        cnt[i] = be32(b + pos + 20 + 4 * i);
    pos += 44;
    size_t timecnt = cnt[3], typecnt = cnt[4];
    size_t need = timecnt * 9 + typecnt * 6 + cnt[5] + (size_t)cnt[2] * 12 + cnt[1] + cnt[0];
    if (typecnt == 0 || typecnt > 256 || timecnt > 100000 || pos + need > len)
        return false;
    const unsigned char *times = b + pos, *idx = times + timecnt * 8, *types = idx + timecnt;
    z->n = timecnt;
    z->at = mf_malloc((timecnt ? timecnt : 1) * sizeof *z->at);
    z->off = mf_malloc((timecnt ? timecnt : 1) * sizeof *z->off);
    for (size_t i = 0; i < timecnt; i++) {
        if (idx[i] >= typecnt)
            return false;
        z->at[i] = be64(times + 8 * i);
        z->off[i] = (int32_t)be32(types + 6 * idx[i]);
    }
    z->first_off = (int32_t)be32(types);
    pos += need;
    /* footer: "\n<TZ string>\n" */
    if (pos < len && b[pos] == '\n') {
        const unsigned char *nl = memchr(b + pos + 1, '\n', len - pos - 1);
        if (nl != NULL && nl > b + pos + 1) {
            char rule[128];
            size_t rl = (size_t)(nl - (b + pos + 1));
            if (rl < sizeof rule) {
                memcpy(rule, b + pos + 1, rl);
                rule[rl] = '\0';
                if (!parse_posix(z, rule))
                    z->has_rule = false;
            }
        }
    }
    return true;
}

/* parse_fixed: MongoDB's parseUtcOffset: "+HH", "+HHMM", "+HH:MM" (or '-'). */
static bool
parse_fixed(const char *s, int32_t *off)
{
    size_t l = strlen(s);
    int sign, h, m = 0;
#define D(i) isdigit((unsigned char)s[i])
    if (l < 3 || (s[0] != '+' && s[0] != '-'))
        return false;
    sign = s[0] == '-' ? -1 : 1;
    if (l == 3 && D(1) && D(2)) {
        h = (s[1] - '0') * 10 + (s[2] - '0');
    } else if (l == 5 && D(1) && D(2) && D(3) && D(4)) {
        h = (s[1] - '0') * 10 + (s[2] - '0');
        m = (s[3] - '0') * 10 + (s[4] - '0');
    } else if (l == 6 && D(1) && D(2) && s[3] == ':' && D(4) && D(5)) {
        h = (s[1] - '0') * 10 + (s[2] - '0');
        m = (s[4] - '0') * 10 + (s[5] - '0');
    } else {
        return false;
    }
#undef D
    *off = sign * (h * 3600 + m * 60);
    return true;
}

mf_tz_t *
mf_tz_open(const char *name)
{
    mf_tz_t *z = mf_calloc(1, sizeof *z);
    unsigned char *buf = NULL;
    FILE *f = NULL;
    char path[256];
    size_t len = 0;

    if (z == NULL)
        return NULL;
    if (parse_fixed(name, &z->fixed_off) || strcmp(name, "UTC") == 0) {
        /* MongoDB takes "UTC" as its UTC zone, not as a zone of the database */
        z->fixed = true;
        return z;
    }
    if (!valid_name(name) || !known_zone(name))
        goto fail;
    snprintf(path, sizeof path, TZ_DIR "%s", name);
    f = fopen(path, "rb");
    if (f == NULL)
        goto fail;
    if (fseek(f, 0, SEEK_END) != 0 || (len = (size_t)ftell(f)) == 0 || len > TZ_MAX_FILE || fseek(f, 0, SEEK_SET) != 0)
        goto fail;
    buf = mf_malloc(len);
    if (fread(buf, 1, len, f) != len)
        goto fail;
    if (!load_tzif(z, buf, len))
        goto fail;
    fclose(f);
    free(buf);
    return z;
fail:
    if (f)
        fclose(f);
    free(buf);
    mf_tz_free(z);
    return NULL;
}

void
mf_tz_free(mf_tz_t *z)
{
    if (z == NULL)
        return;
    free(z->at);
    free(z->off);
    free(z);
}

bool
mf_tz_is_utc(const mf_tz_t *z)
{
    return z == NULL || (z->fixed && z->fixed_off == 0);
}

int32_t
mf_tz_offset(const mf_tz_t *z, int64_t t)
{
    size_t lo, hi;

    if (z == NULL)
        return 0;
    if (z->fixed)
        return z->fixed_off;
    if (z->n == 0 || t < z->at[0])
        return z->n == 0 && z->has_rule ? rule_offset(z, t) : z->first_off;
    if (t >= z->at[z->n - 1] && z->has_rule)
        return rule_offset(z, t);
    /* last transition at or before t */
    lo = 0;
    hi = z->n;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (z->at[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return z->off[lo];
}

int64_t
mf_tz_local_to_utc(const mf_tz_t *z, int64_t local)
{
    /* The offsets in force two days before and after: a wall time maps to local - o for one of them. */
    int32_t oa = mf_tz_offset(z, local - 172800), ob = mf_tz_offset(z, local + 172800);
    int64_t ta = local - oa, tb = local - ob;
    bool va, vb;

    if (oa == ob)
        return local - mf_tz_offset(z, ta);
    va = mf_tz_offset(z, ta) == oa;
    vb = mf_tz_offset(z, tb) == ob;
    if (va && vb)
        return ta < tb ? ta : tb;
    if (va)
        return ta;
    if (vb)
        return tb;
    return ta; /* in the gap: the offset before it, so the time moves forward */
}
