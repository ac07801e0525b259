#pragma once
/*
 * rfc3339: the one place times are written and read as Kubernetes does (metav1.Time is
 * "2006-01-02T15:04:05Z", metav1.MicroTime adds six fractional digits), always UTC.
 *
 * Pure functions of their arguments; any thread.
 */

#include <stdint.h>
#include <time.h>

#define RFC3339_LEN       21 /* "2026-01-02T03:04:05Z" and its NUL */
#define RFC3339_MICRO_LEN 28 /* "2026-01-02T03:04:05.123456Z" and its NUL */

/* Writes t (seconds since the epoch) as "YYYY-MM-DDTHH:MM:SSZ"; the epoch itself when t is
 * out of range. */
void rfc3339_format(time_t t, char out[RFC3339_LEN]);
/* Writes t with microseconds ("...:SS.uuuuuuZ"), the epoch when out of range. */
void rfc3339_format_micro(const struct timespec *t, char out[RFC3339_MICRO_LEN]);
/* Seconds since the epoch of "YYYY-MM-DDTHH:MM:SS" followed by a fraction and "Z" (or
 * nothing), or -1 when s is NULL or not such a time. Offsets other than Z are not read. */
int64_t rfc3339_parse(const char *s);
