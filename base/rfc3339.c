/*
 * rfc3339: Kubernetes' time formats (rfc3339.h).
 */
#include "rfc3339.h"

#include <stdio.h>
#include <string.h>

void rfc3339_format(time_t t, char out[RFC3339_LEN])
{
        struct tm tm;

        if (!gmtime_r(&t, &tm) || !strftime(out, RFC3339_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm))
                memcpy(out, "1970-01-01T00:00:00Z", RFC3339_LEN);
}

void rfc3339_format_micro(const struct timespec *t, char out[RFC3339_MICRO_LEN])
{
        unsigned us =
                t->tv_nsec >= 0 && t->tv_nsec < 1000000000L ? (unsigned)(t->tv_nsec / 1000) : 0;
        struct tm tm;

        if (!gmtime_r(&t->tv_sec, &tm) ||
            !strftime(out, RFC3339_MICRO_LEN, "%Y-%m-%dT%H:%M:%S", &tm)) {
                memcpy(out, "1970-01-01T00:00:00.000000Z", RFC3339_MICRO_LEN);
                return;
        }
        snprintf(out + 19, RFC3339_MICRO_LEN - 19, ".%06uZ", us % 1000000u);
}

int64_t rfc3339_parse(const char *s)
{
        struct tm tm = { 0 };
        int n = 0;

        if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                         &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
                return -1;
        if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
            tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
                return -1;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        return (int64_t)timegm(&tm);
}
