/*
 * log: record formatting and redaction. A record is assembled in a stack buffer (longer
 * records are truncated with a marker) and written with one write(2). Configuration is
 * set from main before threads start and is read-only afterwards, so no lock is needed;
 * secrets may be registered from any thread at any time (a MAAS key read from a Secret):
 * a slot is written under secrets_lock before the count that publishes it (release), and a
 * record reads the count (acquire) and the slots below it without a lock. A registered
 * secret is never freed while threads run.
 */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "xalloc.h"

#define LOG_LINE_MAX 8192
#define LOG_SECRETS  1024
#define KV_SEP       '\x1f' /* between pairs, after formatting */
#define KV_EQ        '\x1e' /* between key and value, after formatting */

_Atomic int log_max_level = LOG_INFO;
static enum log_format log_format = LOG_FORMAT_JSON;
static int log_fd = 2;
static char *secrets[LOG_SECRETS];
static _Atomic size_t n_secrets;
static pthread_mutex_t secrets_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[LOG_LEVEL_COUNT] = {
        [LOG_ERROR] = "error", [LOG_WARN] = "warn",   [LOG_INFO] = "info",
        [LOG_DEBUG] = "debug", [LOG_TRACE] = "trace",
};

static const char *const sensitive_keys[] = {
        "token", "password", "secret", "authorization", "api_key", "apikey",
};

struct line {
        char buf[LOG_LINE_MAX];
        size_t len;
        bool truncated;
        bool in_string; /* inside a JSON string: truncation must close it */
};

void log_setup(enum log_format format, int verbosity, int fd)
{
        int level = LOG_INFO;

        if (verbosity >= 4)
                level = LOG_TRACE;
        else if (verbosity >= 1)
                level = LOG_DEBUG;
        log_format = format;
        log_fd = fd;
        atomic_store(&log_max_level, level);
}

bool log_add_secret(const char *secret)
{
        size_t n;
        bool ok = true;

        if (!secret || strlen(secret) < 4)
                return true;
        pthread_mutex_lock(&secrets_lock);
        n = atomic_load_explicit(&n_secrets, memory_order_relaxed);
        for (size_t i = 0; i < n; i++)
                if (strcmp(secrets[i], secret) == 0)
                        goto out;
        if (n == LOG_SECRETS) {
                ok = false;
                goto out;
        }
        secrets[n] = xstrdup(secret);
        atomic_store_explicit(&n_secrets, n + 1, memory_order_release);
out:
        pthread_mutex_unlock(&secrets_lock);
        return ok;
}

void log_clear_secrets(void)
{
        size_t n;

        pthread_mutex_lock(&secrets_lock);
        n = atomic_load_explicit(&n_secrets, memory_order_relaxed);
        atomic_store_explicit(&n_secrets, 0, memory_order_release);
        for (size_t i = 0; i < n; i++) {
                free(secrets[i]);
                secrets[i] = NULL;
        }
        pthread_mutex_unlock(&secrets_lock);
}

int log_format_parse(const char *s, enum log_format *ret)
{
        if (strcmp(s, "json") == 0)
                *ret = LOG_FORMAT_JSON;
        else if (strcmp(s, "text") == 0)
                *ret = LOG_FORMAT_TEXT;
        else
                return CM_EINVAL;
        return CM_OK;
}

static void line_put(struct line *l, const char *s, size_t n)
{
        size_t room = sizeof(l->buf) - l->len - 32; /* keep space for the marker */

        /* All or nothing, so an escape sequence is never cut in half. */
        if (l->truncated || n > room) {
                l->truncated = true;
                return;
        }
        memcpy(l->buf + l->len, s, n);
        l->len += n;
}

static void line_puts(struct line *l, const char *s)
{
        line_put(l, s, strlen(s));
}

/* Ends the record; line_put always leaves room for this tail. */
static void line_finish(struct line *l)
{
        bool json = log_format == LOG_FORMAT_JSON;
        const char *tail;

        if (l->truncated && json && l->in_string)
                tail = "\",\"truncated\":\"true\"}\n";
        else if (l->truncated)
                tail = json ? ",\"truncated\":\"true\"}\n" : " truncated=true\n";
        else
                tail = json ? "}\n" : "\n";
        memcpy(l->buf + l->len, tail, strlen(tail) + 1);
        l->len += strlen(tail);
}

/* Appends s, JSON-escaped when json is true, with control characters always escaped. */
static void line_put_escaped(struct line *l, const char *s, size_t n, bool json)
{
        char esc[8];

        for (size_t i = 0; i < n && !l->truncated; i++) {
                unsigned char c = (unsigned char)s[i];

                if (c == '"' && json) {
                        line_puts(l, "\\\"");
                } else if (c == '\\' && json) {
                        line_puts(l, "\\\\");
                } else if (c == '\n') {
                        line_puts(l, "\\n");
                } else if (c < 0x20 || c == 0x7f) {
                        (void)snprintf(esc, sizeof(esc), "\\u%04x", c);
                        line_puts(l, esc);
                } else {
                        line_put(l, (const char *)&s[i], 1);
                }
        }
}

static bool key_is_sensitive(const char *key, size_t n)
{
        for (size_t i = 0; i < ARRAY_SIZE(sensitive_keys); i++) {
                const char *k = sensitive_keys[i];
                size_t kl = strlen(k);

                for (size_t j = 0; j + kl <= n; j++)
                        if (strncasecmp(key + j, k, kl) == 0)
                                return true;
        }
        return false;
}

/* Replaces every registered secret in s (in place) with a marker of the same length or
 * shorter; the string can only shrink. */
static void redact(char *s)
{
        static const char marker[] = "[REDACTED]";

        size_t n = atomic_load_explicit(&n_secrets, memory_order_acquire);

        for (size_t i = 0; i < n; i++) {
                size_t sl = strlen(secrets[i]);
                char *p;

                while ((p = strstr(s, secrets[i]))) {
                        size_t ml = sl < sizeof(marker) - 1 ? sl : sizeof(marker) - 1;

                        memcpy(p, marker, ml);
                        memmove(p + ml, p + sl, strlen(p + sl) + 1);
                }
        }
}

static void put_timestamp(struct line *l)
{
        struct timespec ts;
        struct tm tm;
        char tbuf[96];

        (void)clock_gettime(CLOCK_REALTIME, &ts);
        (void)gmtime_r(&ts.tv_sec, &tm);
        (void)snprintf(tbuf, sizeof(tbuf), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
                       tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                       tm.tm_sec, (long)(ts.tv_nsec / 1000000) % 1000);
        line_puts(l, tbuf);
}

static void put_head(struct line *l, enum log_level level, const char *logger, const char *msg)
{
        bool json = log_format == LOG_FORMAT_JSON;

        if (json) {
                line_puts(l, "{\"ts\":\"");
                put_timestamp(l);
                line_puts(l, "\",\"level\":\"");
                line_puts(l, level_names[level]);
                line_puts(l, "\",\"logger\":\"");
                line_put_escaped(l, logger, strlen(logger), true);
                line_puts(l, "\",\"msg\":\"");
                line_put_escaped(l, msg, strlen(msg), true);
                line_puts(l, "\"");
                return;
        }
        put_timestamp(l);
        line_puts(l, " ");
        for (const char *p = level_names[level]; *p; p++)
                line_put(l, &(char){ (char)(*p - 'a' + 'A') }, 1);
        line_puts(l, " ");
        line_puts(l, logger);
        line_puts(l, " ");
        line_put_escaped(l, msg, strlen(msg), false);
}

static void put_pair(struct line *l, const char *key, size_t klen, const char *val, size_t vlen)
{
        bool json = log_format == LOG_FORMAT_JSON;

        if (key_is_sensitive(key, klen)) {
                val = "[REDACTED]";
                vlen = strlen(val);
        }
        line_puts(l, json ? ",\"" : " ");
        line_put_escaped(l, key, klen, json);
        line_puts(l, json ? "\":\"" : "=");
        if (!json && memchr(val, ' ', vlen))
                line_puts(l, "\"");
        l->in_string = json;
        line_put_escaped(l, val, vlen, json);
        if (l->truncated)
                return;
        l->in_string = false;
        if (json || memchr(val, ' ', vlen))
                line_puts(l, "\"");
}

/* Splits "k1\x1ev1\x1fk2\x1ev2" into pairs. */
static void put_pairs(struct line *l, const char *kv)
{
        while (*kv) {
                const char *end = strchr(kv, KV_SEP);
                const char *eq;
                size_t n = end ? (size_t)(end - kv) : strlen(kv);

                eq = memchr(kv, KV_EQ, n);
                if (eq)
                        put_pair(l, kv, (size_t)(eq - kv), eq + 1, n - (size_t)(eq - kv) - 1);
                else if (n)
                        put_pair(l, "extra", 5, kv, n);
                kv += n + (end ? 1 : 0);
        }
}

/* "a=%s b=%d" -> "a\x1e%s\x1fb\x1e%d": a space followed by key= starts a new pair. */
static char *mark_pairs(const char *fmt)
{
        char *out = xstrdup(fmt);
        bool in_key = true;

        for (char *p = out; *p; p++) {
                if (in_key && *p == '=') {
                        *p = KV_EQ;
                        in_key = false;
                } else if (!in_key && *p == ' ' && p[1 + strcspn(p + 1, " =")] == '=') {
                        *p = KV_SEP;
                        in_key = true;
                }
        }
        return out;
}

void log_emit(enum log_level level, const char *logger, const char *msg, const char *kvfmt, ...)
{
        struct line *l = NULL;
        char *marked = NULL;
        char *kv = NULL;
        va_list ap;
        int saved_errno = errno;

        l = xcalloc(1, sizeof(*l));
        put_head(l, level, logger, msg);
        if (kvfmt && *kvfmt) {
                marked = mark_pairs(kvfmt);
                va_start(ap, kvfmt);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
                kv = xvasprintf(marked, ap);
#pragma GCC diagnostic pop
                va_end(ap);
                put_pairs(l, kv);
        }
        line_finish(l);
        redact(l->buf);
        (void)!write(log_fd, l->buf, strlen(l->buf));
        free(kv);
        free(marked);
        free(l);
        errno = saved_errno;
}
