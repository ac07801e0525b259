/*
 * parse: strict value parsers. Numbers go through strtoull/strtod only after a character
 * check has ruled out what those functions would quietly accept (spaces, signs, hex,
 * "inf"), then errno, the end pointer and the range are checked. Durations follow Go's
 * time.ParseDuration: the sum of <number><unit> terms, computed in nanoseconds with
 * overflow checks, so "1h30m" and "1.5h" agree with what operators know from other
 * Kubernetes controllers.
 */
#include "parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "xalloc.h"

#define NS_PER_MS      UINT64_C(1000000)
#define DURATION_MAX   ((uint64_t)INT64_MAX) /* Go's time.Duration is int64 nanoseconds */
#define FRAC_SCALE_MAX UINT64_C(100000000000000000)

struct unit {
        const char *name;
        uint64_t factor;
};

static const struct unit duration_units[] = {
        { "ns", 1 },
        { "us", UINT64_C(1000) },
        { "\u00b5s", UINT64_C(1000) }, /* micro sign */
        { "\u03bcs", UINT64_C(1000) }, /* Greek small letter mu */
        { "ms", UINT64_C(1000000) },
        { "s", UINT64_C(1000000000) },
        { "m", UINT64_C(60000000000) },
        { "h", UINT64_C(3600000000000) },
};

static const struct unit size_units[] = {
        { "", 1 },
        { "Ki", UINT64_C(1) << 10 },
        { "Mi", UINT64_C(1) << 20 },
        { "Gi", UINT64_C(1) << 30 },
};

static const char *const bool_true[] = { "1", "t", "T", "true", "TRUE", "True" };
static const char *const bool_false[] = { "0", "f", "F", "false", "FALSE", "False" };

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
        return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static const struct unit *unit_find(const struct unit *units, size_t n, const char *s, size_t len)
{
        for (size_t i = 0; i < n; i++)
                if (strlen(units[i].name) == len && memcmp(units[i].name, s, len) == 0)
                        return &units[i];
        return NULL;
}

static bool in_list(const char *const *list, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(list[i], s) == 0)
                        return true;
        return false;
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        unsigned long long v;
        char *end = NULL;

        /* strtoull would skip spaces and accept a sign (even "-1" becomes ULLONG_MAX). */
        if (!s || !is_digit(s[0]))
                return CM_EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || v < min || v > max)
                return CM_EINVAL;
        *ret = v;
        return 0;
}

int parse_bool(const char *s, bool *ret)
{
        if (!s)
                return CM_EINVAL;
        if (in_list(bool_true, ARRAY_SIZE(bool_true), s)) {
                *ret = true;
                return 0;
        }
        if (in_list(bool_false, ARRAY_SIZE(bool_false), s)) {
                *ret = false;
                return 0;
        }
        return CM_EINVAL;
}

/* Reads "<digits>[.<digits>]" at *p: the whole part exactly, the fraction as frac/scale
 * (digits beyond 17 are dropped, as Go does once its fraction would overflow). */
static int duration_number(const char **p,
                           uint64_t *ret_whole,
                           uint64_t *ret_frac,
                           uint64_t *ret_scale)
{
        const char *s = *p;
        uint64_t whole = 0, frac = 0, scale = 1;
        bool digits = false;

        for (; is_digit(*s); s++) {
                if (__builtin_mul_overflow(whole, 10, &whole) ||
                    __builtin_add_overflow(whole, (uint64_t)(*s - '0'), &whole))
                        return CM_EINVAL;
                digits = true;
        }
        if (*s == '.') {
                for (s++; is_digit(*s); s++) {
                        if (scale < FRAC_SCALE_MAX) {
                                frac = frac * 10 + (uint64_t)(*s - '0');
                                scale *= 10;
                        }
                        digits = true;
                }
        }
        if (!digits)
                return CM_EINVAL;
        *p = s;
        *ret_whole = whole;
        *ret_frac = frac;
        *ret_scale = scale;
        return 0;
}

/* One "<number><unit>" term of a duration, in nanoseconds; advances *p past it. */
static int duration_term(const char **p, uint64_t *ret_ns)
{
        const char *s = *p;
        uint64_t whole, frac, scale, ns;
        const struct unit *u;
        size_t len;
        int r;

        r = duration_number(&s, &whole, &frac, &scale);
        if (r < 0)
                return r;
        len = strcspn(s, "0123456789.");
        u = unit_find(duration_units, ARRAY_SIZE(duration_units), s, len);
        if (!u || __builtin_mul_overflow(whole, u->factor, &ns))
                return CM_EINVAL;
        /* frac/scale < 1, so this part is below one unit and fits; double is Go's method. */
        if (__builtin_add_overflow(
                    ns, (uint64_t)((double)frac * ((double)u->factor / (double)scale)), &ns))
                return CM_EINVAL;
        *p = s + len;
        *ret_ns = ns;
        return 0;
}

int parse_duration_ms(const char *s, uint64_t *ret)
{
        uint64_t total = 0, ns;
        int r;

        if (!s || !*s)
                return CM_EINVAL;
        if (strcmp(s, "0") == 0) {
                *ret = 0;
                return 0;
        }
        while (*s) {
                r = duration_term(&s, &ns);
                if (r < 0)
                        return r;
                if (__builtin_add_overflow(total, ns, &total) || total > DURATION_MAX)
                        return CM_EINVAL;
        }
        *ret = total / NS_PER_MS;
        return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
        const struct unit *u;
        uint64_t v;
        size_t digits;
        char *num;
        int r;

        if (!s)
                return CM_EINVAL;
        digits = strspn(s, "0123456789");
        u = unit_find(size_units, ARRAY_SIZE(size_units), s + digits, strlen(s + digits));
        if (digits == 0 || !u)
                return CM_EINVAL;
        num = xstrndup(s, digits);
        r = parse_u64(num, 0, UINT64_MAX, &v);
        free(num);
        if (r < 0 || __builtin_mul_overflow(v, u->factor, &v))
                return CM_EINVAL;
        *ret = v;
        return 0;
}

int parse_double(const char *s, double min, double max, double *ret)
{
        char *end = NULL;
        double v;

        /* Only plain decimal notation: strtod would also take spaces, signs, hex floats,
         * "inf" and "nan". */
        if (!s || !(is_digit(s[0]) || s[0] == '.') || s[strspn(s, "0123456789.eE+-")] != '\0')
                return CM_EINVAL;
        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || *end != '\0' || !isfinite(v) || v < min || v > max)
                return CM_EINVAL;
        *ret = v;
        return 0;
}

/* Host names and IPv4 addresses: letters, digits, '.', '-', '_'; may be empty. */
static bool host_name_ok(const char *s, size_t len)
{
        for (size_t i = 0; i < len; i++)
                if (!is_alnum(s[i]) && !strchr(".-_", s[i]))
                        return false;
        return true;
}

/* An IPv6 literal without brackets, with an optional "%zone". */
static bool host_ipv6_ok(const char *s, size_t len)
{
        const char *zone = memchr(s, '%', len);
        size_t addr_len = zone ? (size_t)(zone - s) : len;

        if (addr_len == 0 || !memchr(s, ':', addr_len))
                return false;
        for (size_t i = 0; i < addr_len; i++)
                if (!is_digit(s[i]) && !strchr("abcdefABCDEF:.", s[i]))
                        return false;
        return !zone || (len - addr_len > 1 && host_name_ok(zone + 1, len - addr_len - 1));
}

int parse_host_port(const char *addr, char **ret_host, uint16_t *ret_port)
{
        const char *colon, *host = addr;
        uint64_t port;
        size_t len;

        if (!addr)
                return CM_EINVAL;
        colon = strrchr(addr, ':');
        if (!colon)
                return CM_EINVAL;
        len = (size_t)(colon - addr);
        if (addr[0] == '[') {
                if (len < 2 || colon[-1] != ']' || !host_ipv6_ok(addr + 1, len - 2))
                        return CM_EINVAL;
                host = addr + 1;
                len -= 2;
        } else if (!host_name_ok(addr, len)) {
                return CM_EINVAL; /* includes unbracketed IPv6 ("::1:80" is ambiguous) */
        }
        if (parse_u64(colon + 1, 0, UINT16_MAX, &port) < 0)
                return CM_EINVAL;
        *ret_host = xstrndup(host, len);
        *ret_port = (uint16_t)port;
        return 0;
}
