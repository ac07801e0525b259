#pragma once
/*
 * maas_auth: MAAS credentials and endpoint parsing, and the OAuth 1.0a PLAINTEXT
 * Authorization header MAAS expects (maas-api.md §2): consumer key, token key and
 * signature "&<token_secret>" (MAAS's consumer secret is empty), with a fresh nonce and
 * timestamp on every request.
 *
 * Secrets: error messages never contain the key or any part of it. Ownership: parse
 * results belong to the caller (maas_credentials_release / free). All functions are pure
 * or use only thread-safe randomness (getrandom), so any thread may call them.
 */

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "compiler.h"

struct maas_credentials {
        char *consumer_key;
        char *token_key;
        char *token_secret;
};

/* Parses "consumer_key:token_key:token_secret" (MAAS_API_KEY). CM_EINVAL with a message
 * saying what is wrong (never the key itself) for anything else: missing or extra parts,
 * empty parts, whitespace or control characters. */
MUST_CHECK int maas_credentials_parse(const char *api_key,
                                      struct maas_credentials *ret,
                                      char **ret_err);
/* Frees the strings (the secret is wiped first) and zeroes *c; accepts a zeroed struct. */
void maas_credentials_release(struct maas_credentials *c);

/* Turns MAAS_ENDPOINT ("http://host:5240/MAAS", trailing slash optional, or already ending
 * in "/api/2.0[/]") into the API base URL ".../MAAS/api/2.0/". CM_EINVAL with a message for
 * a missing scheme (http/https only), an empty host, a query or fragment, or whitespace. */
MUST_CHECK int maas_endpoint_parse(const char *endpoint, char **ret_base_url, char **ret_err);

/* RFC 3986 percent-encoding: unreserved characters kept, everything else %XX. New string. */
char *maas_percent_encode(const char *s);

/* The header line "Authorization: OAuth realm=\"\", oauth_consumer_key=..." for one request,
 * with the given timestamp (Unix seconds) and nonce. New string; it contains the token
 * secret, so callers never log it. */
char *maas_auth_header(const struct maas_credentials *c, int64_t timestamp, const char *nonce);

/* Writes a fresh random nonce (32 lowercase hex characters + NUL) into out. */
void maas_auth_nonce(char out[33]);

/* Reads the Secret (its JSON as the API server returns it) of a per-cluster MAAS identity
 * (MaasCluster spec.identityRef, docs/credentials.md): data.endpoint, data.apiKey and the
 * optional data.caBundle (PEM), base64-decoded, trailing newlines dropped from the first two.
 * New strings; *ret_ca is NULL without a bundle. CM_EINVAL with *ret_msg naming the key
 * that is missing or wrong (never its value) otherwise. Each value is capped at 256 KiB. */
MUST_CHECK int maas_secret_parse(const cJSON *secret,
                                 char **ret_endpoint,
                                 char **ret_key,
                                 char **ret_ca,
                                 size_t *ret_ca_len,
                                 char **ret_msg);
