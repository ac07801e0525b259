/*
 * config_values: one generic setter converts text into a field, so a default, a YAML
 * scalar, an environment variable and a flag value all go through exactly the same checks;
 * when a value is refused, the type's "expected ..." text says what would do. Also the
 * capped file reads behind --config and --maas-api-key-file.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "config_priv.h"
#include "err.h"
#include "parse.h"
#include "xalloc.h"

/* ---- files ---- */

/* Reads fd to its end into b; CM_EIO or CM_ETOOBIG (past b's maximum) with a message. */
static int read_all(int fd, struct buf *b, size_t max, const char *path, char **reterr)
{
        char chunk[READ_CHUNK];
        ssize_t n;
        int r = 0;

        while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        *reterr = xasprintf("%s: %s", path, strerrordesc_np(errno));
                        r = CM_EIO;
                        break;
                }
                if (buf_append(b, chunk, (size_t)n) < 0) {
                        *reterr = xasprintf("%s: file is larger than %zu bytes", path, max);
                        r = CM_ETOOBIG;
                        break;
                }
        }
        explicit_bzero(chunk, sizeof(chunk)); /* may have held a key */
        return r;
}

/* Reads a whole regular file of at most max bytes into a new NUL-terminated string. */
int config_read_file_capped(
        const char *path, size_t max, char **ret, size_t *ret_len, char **reterr)
{
        struct buf b;
        struct stat st;
        int fd, r;

        buf_init(&b, max);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0 || fstat(fd, &st) < 0) {
                *reterr = xasprintf("%s: %s", path, strerrordesc_np(errno));
                r = CM_EIO;
                goto out;
        }
        if (!S_ISREG(st.st_mode)) {
                *reterr = xasprintf("%s: not a regular file", path);
                r = CM_EIO;
                goto out;
        }
        r = read_all(fd, &b, max, path, reterr);
        if (r == 0)
                *ret = buf_take(&b, ret_len);
out:
        if (fd >= 0)
                close(fd);
        if (r < 0 && b.data)
                explicit_bzero(b.data, b.len); /* may be a partial key */
        buf_release(&b);
        return r;
}

void config_secret_free(char *s)
{
        if (s)
                explicit_bzero(s, strlen(s));
        free(s);
}

/* ---- typed setters: text -> field; CM_EINVAL without *ret_why means "invalid value" ---- */

static int set_string(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        char **p = field;

        (void)ret_why;
        if (k->check && !k->check(s))
                return CM_EINVAL;
        if (k->secret)
                config_secret_free(*p);
        else
                free(*p);
        *p = xstrdup(s);
        return 0;
}

static int set_bool(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        (void)k;
        (void)ret_why;
        return parse_bool(s, field);
}

static int set_int(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_u64(s, k->min, k->max, &v) < 0)
                return CM_EINVAL;
        *(int *)field = (int)v;
        return 0;
}

static int set_uint(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_u64(s, k->min, k->max, &v) < 0)
                return CM_EINVAL;
        *(unsigned *)field = (unsigned)v;
        return 0;
}

static int set_u16(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_u64(s, k->min, k->max, &v) < 0)
                return CM_EINVAL;
        *(uint16_t *)field = (uint16_t)v;
        return 0;
}

static int set_duration(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_duration_ms(s, &v) < 0 || v < k->min || v > k->max)
                return CM_EINVAL;
        *(uint64_t *)field = v;
        return 0;
}

static int set_seconds(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_duration_ms(s, &v) < 0 || v < k->min || v > k->max || v % 1000 != 0)
                return CM_EINVAL;
        *(unsigned *)field = (unsigned)(v / 1000);
        return 0;
}

static int set_size(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        uint64_t v;

        (void)ret_why;
        if (parse_size(s, &v) < 0 || v < k->min || v > k->max)
                return CM_EINVAL;
        *(size_t *)field = (size_t)v;
        return 0;
}

static int set_double(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        (void)ret_why;
        return parse_double(s, k->dmin, k->dmax, field);
}

static int set_enum(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        (void)ret_why;
        return k->set_enum(s, field);
}

static int set_custom(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        return k->set_custom(s, field, ret_why);
}

static int set_secret_file(void *field, const struct cfg_key *k, const char *s, char **ret_why)
{
        char **p = field;
        char *data = NULL;
        size_t len = 0;
        int r;

        (void)k;
        r = config_read_file_capped(s, API_KEY_FILE_MAX, &data, &len, ret_why);
        if (r < 0)
                return r;
        while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
                data[--len] = '\0';
        if (len == 0 || memchr(data, '\0', len)) {
                *ret_why = xasprintf("%s: expected one line holding the MAAS API key", s);
                config_secret_free(data);
                return CM_EINVAL;
        }
        config_secret_free(*p);
        *p = data;
        return 0;
}

/* ---- "expected ..." texts ---- */

/* Formats milliseconds as a Go duration ("1h30m", "500ms", "0s"). */
void config_fmt_duration(uint64_t ms, char *out, size_t size)
{
        static const struct {
                uint64_t ms;
                const char *unit;
        } parts[] = { { HOURS(1), "h" }, { MINS(1), "m" }, { SECS(1), "s" }, { 1, "ms" } };

        size_t n = 0;

        out[0] = '\0';
        for (size_t i = 0; i < ARRAY_SIZE(parts) && n < size; i++) {
                if (ms / parts[i].ms == 0)
                        continue;
                n += (size_t)snprintf(out + n, size - n, "%" PRIu64 "%s", ms / parts[i].ms,
                                      parts[i].unit);
                ms %= parts[i].ms;
        }
        if (out[0] == '\0')
                snprintf(out, size, "0s");
}

static void fmt_size(uint64_t bytes, char *out, size_t size)
{
        if (bytes != 0 && bytes % MI(1) == 0)
                snprintf(out, size, "%" PRIu64 "Mi", bytes / MI(1));
        else if (bytes != 0 && bytes % KI(1) == 0)
                snprintf(out, size, "%" PRIu64 "Ki", bytes / KI(1));
        else
                snprintf(out, size, "%" PRIu64, bytes);
}

static char *expect_text(const struct cfg_key *k)
{
        return xstrdup(k->expect ? k->expect : "expected a valid value");
}

static char *expect_bool(const struct cfg_key *k)
{
        (void)k;
        return xstrdup("expected true or false");
}

static char *expect_integer(const struct cfg_key *k)
{
        return xasprintf("expected an integer between %" PRIu64 " and %" PRIu64, k->min, k->max);
}

static char *expect_duration(const struct cfg_key *k)
{
        char lo[48], hi[48];

        config_fmt_duration(k->min, lo, sizeof(lo));
        config_fmt_duration(k->max, hi, sizeof(hi));
        return xasprintf("expected a duration between %s and %s, such as 90s or 1h30m", lo, hi);
}

static char *expect_seconds(const struct cfg_key *k)
{
        char lo[48], hi[48];

        config_fmt_duration(k->min, lo, sizeof(lo));
        config_fmt_duration(k->max, hi, sizeof(hi));
        return xasprintf("expected whole seconds between %s and %s, such as 30s", lo, hi);
}

static char *expect_size(const struct cfg_key *k)
{
        char lo[32], hi[32];

        fmt_size(k->min, lo, sizeof(lo));
        fmt_size(k->max, hi, sizeof(hi));
        return xasprintf("expected a size between %s and %s (bytes, or with a Ki, Mi or Gi "
                         "suffix)",
                         lo, hi);
}

static char *expect_double(const struct cfg_key *k)
{
        return xasprintf("expected a number between %g and %g", k->dmin, k->dmax);
}

static const struct {
        cfg_set_fn *set;
        cfg_expect_fn *expect;
        const char *metavar;
} type_ops[CFG_TYPE_COUNT] = {
        [CFG_STRING] = { set_string, expect_text, "STRING" },
        [CFG_BOOL] = { set_bool, expect_bool, "" },
        [CFG_INT] = { set_int, expect_integer, "INT" },
        [CFG_UINT] = { set_uint, expect_integer, "INT" },
        [CFG_U16] = { set_u16, expect_integer, "PORT" },
        [CFG_DURATION] = { set_duration, expect_duration, "DURATION" },
        [CFG_SECONDS] = { set_seconds, expect_seconds, "DURATION" },
        [CFG_SIZE] = { set_size, expect_size, "SIZE" },
        [CFG_DOUBLE] = { set_double, expect_double, "FLOAT" },
        [CFG_ENUM] = { set_enum, expect_text, "VALUE" },
        [CFG_SECRET_FILE] = { set_secret_file, expect_text, "FILE" },
        [CFG_CUSTOM] = { set_custom, expect_text, "LIST" },
};

const char *config_type_metavar(enum cfg_type type)
{
        return type_ops[type].metavar;
}

/* ---- the generic setter ---- */

const struct cfg_key *config_key_find(const char *name, size_t len)
{
        for (size_t i = 0; i < config_keys_n; i++) {
                const char *n = config_keys[i].name, *sn = config_keys[i].short_name;

                if (strlen(n) == len && memcmp(n, name, len) == 0)
                        return &config_keys[i];
                if (sn && strlen(sn) == len && memcmp(sn, name, len) == 0)
                        return &config_keys[i];
        }
        return NULL;
}

/* Sets key k from text s. On failure *reterr = "<where>: invalid value "s": expected …"
 * (the value is left out for secrets) or "<where>: <reason>". */
int config_key_set(
        struct config *c, const struct cfg_key *k, const char *s, const char *where, char **reterr)
{
        char *why = NULL, *expect;
        int r;

        r = type_ops[k->type].set((char *)c + k->offset, k, s, &why);
        if (r == 0)
                return 0;
        if (why) {
                *reterr = xasprintf("%s: %s", where, why);
                free(why);
                return r;
        }
        expect = type_ops[k->type].expect(k);
        if (k->secret)
                *reterr = xasprintf("%s: invalid value: %s", where, expect);
        else
                *reterr = xasprintf("%s: invalid value \"%s\": %s", where, s, expect);
        free(expect);
        return r;
}
