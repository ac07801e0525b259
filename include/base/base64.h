#pragma once
/*
 * base64: RFC 4648 standard alphabet with padding (what Kubernetes uses for Secret data and
 * JSON patches, and MAAS for user_data). Pure functions; thread-safe.
 */

#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"

/* Encodes n bytes into a new NUL-terminated string (caller frees). */
char *base64_encode(const void *data, size_t n);
/* Decodes a padded base64 string of length n into a new buffer (NUL-terminated for
 * convenience, not counted in *ret_len). CM_EPARSE on any invalid character or padding. */
MUST_CHECK int base64_decode(const char *s, size_t n, unsigned char **ret, size_t *ret_len);
