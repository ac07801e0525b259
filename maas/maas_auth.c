/*
 * maas_auth: MAAS_API_KEY / MAAS_ENDPOINT parsing and the OAuth 1.0a PLAINTEXT header.
 * PLAINTEXT is what MAAS's own CLI can use and needs no base string: the signature is
 * escape(consumer_secret) "&" escape(token_secret) with an empty consumer secret. Messages
 * describe the problem without echoing the key. Pure functions; thread-safe.
 */
#include "maas_auth.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base64.h"
#include "buf.h"
#include "err.h"
#include "json.h"
#include "xalloc.h"

static bool bad_chars(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
                        return true;
        return false;
}

static int key_error(char **ret_err, const char *what)
{
        if (ret_err)
                *ret_err = xasprintf("MAAS API key is malformed: %s (expected "
                                     "consumer_key:token_key:token_secret)",
                                     what);
        return CM_EINVAL;
}

int maas_credentials_parse(const char *api_key, struct maas_credentials *ret, char **ret_err)
{
        const char *a, *b;

        if (!api_key || !*api_key)
                return key_error(ret_err, "it is empty");
        a = strchr(api_key, ':');
        b = a ? strchr(a + 1, ':') : NULL;
        if (!a || !b)
                return key_error(ret_err, "it has fewer than 3 ':'-separated parts");
        if (strchr(b + 1, ':'))
                return key_error(ret_err, "it has more than 3 ':'-separated parts");
        if (a == api_key || b == a + 1 || !b[1])
                return key_error(ret_err, "a part is empty");
        if (bad_chars(api_key, strlen(api_key)))
                return key_error(ret_err, "it contains whitespace or control characters");
        *ret = (struct maas_credentials){
                .consumer_key = xstrndup(api_key, (size_t)(a - api_key)),
                .token_key = xstrndup(a + 1, (size_t)(b - a - 1)),
                .token_secret = xstrdup(b + 1),
        };
        return 0;
}

void maas_credentials_release(struct maas_credentials *c)
{
        if (c->token_secret)
                explicit_bzero(c->token_secret, strlen(c->token_secret));
        free(c->consumer_key);
        free(c->token_key);
        free(c->token_secret);
        *c = (struct maas_credentials){ 0 };
}

static int endpoint_error(char **ret_err, const char *what)
{
        if (ret_err)
                *ret_err = xasprintf("MAAS endpoint is malformed: %s (expected "
                                     "http[s]://host[:port]/MAAS)",
                                     what);
        return CM_EINVAL;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
        size_t sl = strlen(suffix);

        return n >= sl && memcmp(s + n - sl, suffix, sl) == 0;
}

int maas_endpoint_parse(const char *endpoint, char **ret_base_url, char **ret_err)
{
        const char *host;
        size_t n;

        if (!endpoint || !*endpoint)
                return endpoint_error(ret_err, "it is empty");
        n = strlen(endpoint);
        if (bad_chars(endpoint, n))
                return endpoint_error(ret_err, "it contains whitespace or control characters");
        if (strncmp(endpoint, "http://", 7) == 0)
                host = endpoint + 7;
        else if (strncmp(endpoint, "https://", 8) == 0)
                host = endpoint + 8;
        else
                return endpoint_error(ret_err, "the scheme must be http:// or https://");
        if (!*host || *host == '/' || *host == ':')
                return endpoint_error(ret_err, "the host is empty");
        if (strpbrk(endpoint, "?#"))
                return endpoint_error(ret_err, "it must not have a query or fragment");
        while (n > 0 && endpoint[n - 1] == '/')
                n--;
        if (ends_with(endpoint, n, "/api/2.0"))
                *ret_base_url = xasprintf("%.*s/", (int)n, endpoint);
        else
                *ret_base_url = xasprintf("%.*s/api/2.0/", (int)n, endpoint);
        return 0;
}

char *maas_percent_encode(const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        char *out = xmalloc(strlen(s) * 3 + 1);
        size_t o = 0;

        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;

                if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~') {
                        out[o++] = (char)c;
                } else {
                        out[o++] = '%';
                        out[o++] = hex[c >> 4];
                        out[o++] = hex[c & 15];
                }
        }
        out[o] = '\0';
        return out;
}

char *maas_auth_header(const struct maas_credentials *c, int64_t timestamp, const char *nonce)
{
        char *ck = maas_percent_encode(c->consumer_key);
        char *tk = maas_percent_encode(c->token_key);
        char *ts = maas_percent_encode(c->token_secret);
        char *n = maas_percent_encode(nonce);
        char *h;

        /* signature = escape("") "&" escape(secret), itself escaped inside the header */
        h = xasprintf("Authorization: OAuth realm=\"\", oauth_consumer_key=\"%s\", "
                      "oauth_token=\"%s\", oauth_signature_method=\"PLAINTEXT\", "
                      "oauth_signature=\"%%26%s\", oauth_timestamp=\"%lld\", "
                      "oauth_nonce=\"%s\", oauth_version=\"1.0\"",
                      ck, tk, ts, (long long)timestamp, n);
        explicit_bzero(ts, strlen(ts));
        free(ck);
        free(tk);
        free(ts);
        free(n);
        return h;
}

void maas_auth_nonce(char out[33])
{
        static const char hex[] = "0123456789abcdef";
        unsigned char rnd[16];
        size_t got = 0;

        while (got < sizeof(rnd)) {
                ssize_t r = getrandom(rnd + got, sizeof(rnd) - got, 0);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        abort(); /* getrandom cannot fail on Linux >= 3.17 after boot */
                got += (size_t)r;
        }
        for (size_t i = 0; i < sizeof(rnd); i++) {
                out[2 * i] = hex[rnd[i] >> 4];
                out[2 * i + 1] = hex[rnd[i] & 15];
        }
        out[32] = '\0';
}

/* --- the Secret of a per-cluster identity (docs/credentials.md) ------------------------------ */

/* a Secret value we accept: far above any endpoint, key or CA bundle */
#define SECRET_VALUE_MAX (256 * 1024)

/* data.<k> decoded (capped, NUL-terminated); CM_ENOTFOUND when absent. */
static int secret_value(
        const cJSON *secret, const char *k, char **ret, size_t *ret_len, char **ret_msg)
{
        const char *b64 = json_find_str(secret, "data", k, NULL);
        unsigned char *raw = NULL;
        size_t n = 0;
        int err;

        if (!b64)
                return CM_ENOTFOUND;
        if (strlen(b64) > SECRET_VALUE_MAX / 3 * 4 + 4) {
                *ret_msg = xasprintf("data.%s is larger than %d bytes", k, SECRET_VALUE_MAX);
                return CM_EINVAL;
        }
        err = base64_decode(b64, strlen(b64), &raw, &n);
        if (err) {
                *ret_msg = xasprintf("data.%s is not valid base64", k);
                return CM_EINVAL;
        }
        *ret = xrealloc(raw, n + 1);
        (*ret)[n] = '\0';
        if (ret_len)
                *ret_len = n;
        return 0;
}

/* Trailing newlines (`echo` into a file, `kubectl create secret --from-file`) are not part of
 * an endpoint or a key. */
static void chomp(char *s)
{
        size_t n = strlen(s);

        while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
                s[--n] = '\0';
}

int maas_secret_parse(const cJSON *secret,
                      char **ret_endpoint,
                      char **ret_key,
                      char **ret_ca,
                      size_t *ret_ca_len,
                      char **ret_msg)
{
        char *ep = NULL, *key = NULL, *ca = NULL;
        size_t ca_len = 0;
        int err;

        err = secret_value(secret, "endpoint", &ep, NULL, ret_msg);
        if (err == CM_ENOTFOUND)
                *ret_msg = xstrdup("data.endpoint is missing");
        if (err == 0) {
                err = secret_value(secret, "apiKey", &key, NULL, ret_msg);
                if (err == CM_ENOTFOUND)
                        *ret_msg = xstrdup("data.apiKey is missing");
        }
        if (err == 0) {
                err = secret_value(secret, "caBundle", &ca, &ca_len, ret_msg);
                if (err == CM_ENOTFOUND)
                        err = 0;
                else if (err == 0 && !strstr(ca, "-----BEGIN CERTIFICATE-----")) {
                        *ret_msg = xstrdup("data.caBundle holds no PEM certificate");
                        err = CM_EINVAL;
                }
        }
        if (err) {
                if (key)
                        explicit_bzero(key, strlen(key));
                free(ep);
                free(key);
                free(ca);
                return CM_EINVAL;
        }
        chomp(ep);
        chomp(key);
        *ret_endpoint = ep;
        *ret_key = key;
        *ret_ca = ca;
        *ret_ca_len = ca_len;
        return 0;
}
