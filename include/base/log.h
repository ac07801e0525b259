#pragma once
/*
 * log: structured logging, one record per line, written with a single write(2) so lines
 * from different threads never interleave.
 *
 * Format: JSON by default ({"ts":…,"level":…,"logger":…,"msg":…,<key>:<value>…}) or text
 * for people ("2026-11-29T08:35:53.123Z INFO https listening port=9443").
 *
 * Key/values are given as one printf format of space-separated key=%conv pairs:
 *     log_info("https", "listening", "addr=%s port=%u", addr, port);
 * Each value is exactly one conversion; a value may contain spaces.
 *
 * Secrets: values registered with log_add_secret() are replaced by "[REDACTED]" wherever
 * they appear in a record, and any key whose name contains "token", "password", "secret",
 * "authorization" or "api_key" has its value redacted. Logging never fails and never blocks
 * on anything but the write. All functions are thread-safe once log_setup() has run.
 */

#include <stdatomic.h>
#include <stdbool.h>

#include "compiler.h"

enum log_level {
        LOG_ERROR,
        LOG_WARN,
        LOG_INFO,
        LOG_DEBUG,
        LOG_TRACE,
        LOG_LEVEL_COUNT,
};

enum log_format {
        LOG_FORMAT_JSON,
        LOG_FORMAT_TEXT,
};

extern _Atomic int log_max_level;

/* Sets format, verbosity (klog's -v: 0 = info, 1..3 = debug, >= 4 = trace) and the output
 * descriptor (2 for stderr). Call from main before threads start; tests may call again. */
void log_setup(enum log_format format, int verbosity, int fd);
/* Registers a secret string (copied) never to be written; registering one again is a no-op.
 * Strings shorter than 4 bytes are ignored. Any thread, at any time (a key read from a
 * Secret while the controllers run). At most 1024 secrets: false when the table is full
 * (the string is then NOT redacted), true otherwise. */
bool log_add_secret(const char *secret);
/* Forgets every registered secret (tests; no other thread may log meanwhile). */
void log_clear_secrets(void);
/* Parses "json" or "text"; CM_EINVAL otherwise. */
MUST_CHECK int log_format_parse(const char *s, enum log_format *ret);

void log_emit(enum log_level level, const char *logger, const char *msg, const char *kvfmt, ...)
        PRINTF_LIKE(4, 5);

#define log_at(lvl, logger, msg, ...)                                                         \
        do {                                                                                  \
                if ((int)(lvl) <= atomic_load_explicit(&log_max_level, memory_order_relaxed)) \
                        log_emit((lvl), (logger), (msg), __VA_ARGS__);                        \
        } while (0)

#define log_error(logger, msg, ...) log_at(LOG_ERROR, logger, msg, __VA_ARGS__)
#define log_warn(logger, msg, ...)  log_at(LOG_WARN, logger, msg, __VA_ARGS__)
#define log_info(logger, msg, ...)  log_at(LOG_INFO, logger, msg, __VA_ARGS__)
#define log_debug(logger, msg, ...) log_at(LOG_DEBUG, logger, msg, __VA_ARGS__)
#define log_trace(logger, msg, ...) log_at(LOG_TRACE, logger, msg, __VA_ARGS__)
