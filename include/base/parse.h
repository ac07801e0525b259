#pragma once
/*
 * parse: strict text-to-value parsers for configuration values and other operator input.
 * Each parser accepts the whole string or nothing: no leading or trailing spaces, no signs
 * unless stated, no trailing junk, no silent wrap-around. On failure they return CM_EINVAL
 * and leave *ret untouched. Pure functions; thread-safe. Only parse_host_port allocates.
 */

#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"

/* Decimal digits only (no sign, no spaces, no "0x"), value within [min, max]. */
MUST_CHECK int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret);
/* Go's strconv.ParseBool set: 1 0 t f T F true false TRUE FALSE True False. */
MUST_CHECK int parse_bool(const char *s, bool *ret);
/* A Go-style duration in milliseconds: "0", "500ms", "15s", "1h30m", "1.5h" (units ns, us,
 * µs, ms, s, m, h; sub-millisecond parts are truncated). Rejects signs, missing units,
 * unknown units, empty strings and anything above Go's limit (about 292 years). */
MUST_CHECK int parse_duration_ms(const char *s, uint64_t *ret);
/* A byte count: decimal digits with an optional binary suffix Ki, Mi or Gi ("8Mi",
 * "65536"). Rejects overflow of 64 bits. */
MUST_CHECK int parse_size(const char *s, uint64_t *ret);
/* A finite, non-negative decimal number ("20", "0.5", "1e3") within [min, max]. No sign,
 * no hex floats, no inf or nan. */
MUST_CHECK int parse_double(const char *s, double min, double max, double *ret);
/* A listen address HOST:PORT: ":8080" (host ""), "127.0.0.1:8080", "[::1]:8080" (host
 * "::1"), "localhost:0". The port is 0..65535. *ret_host is a new string the caller frees. */
MUST_CHECK int parse_host_port(const char *addr, char **ret_host, uint16_t *ret_port);
