/* Unit tests: MAAS API key and endpoint parsing, the OAuth PLAINTEXT header, image split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "image_split_cases.h"
#include "maas_auth.h"
#include "maas_client.h"
#include "xalloc.h"

static void test_maas_auth__parses_three_part_key(void **state)
{
        struct maas_credentials c = { 0 };
        char *err = NULL;

        (void)state;
        assert_int_equal(maas_credentials_parse("ck1:tk2:sec3", &c, &err), 0);
        assert_string_equal(c.consumer_key, "ck1");
        assert_string_equal(c.token_key, "tk2");
        assert_string_equal(c.token_secret, "sec3");
        assert_null(err);
        maas_credentials_release(&c);
        assert_null(c.token_secret);
}

static void test_maas_auth__rejects_malformed_keys_without_echoing_them(void **state)
{
        static const char *const bad[] = {
                "",       "onlyone", "two:parts", "a:b:c:d",    ":tk:ts",
                "ck::ts", "ck:tk:",  "ck:t k:ts", "ck:tk:ts\n", "ck:tk:s\tecret",
        };
        struct maas_credentials c = { 0 };

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *err = NULL;

                assert_int_equal(maas_credentials_parse(bad[i], &c, &err), CM_EINVAL);
                assert_non_null(err);
                assert_non_null(strstr(err, "MAAS API key is malformed"));
                if (strlen(bad[i]) > 4)
                        assert_null(strstr(err, bad[i]));
                assert_null(c.consumer_key); /* untouched on failure */
                free(err);
        }
        assert_int_equal(maas_credentials_parse(NULL, &c, NULL), CM_EINVAL);
}

static void test_maas_auth__endpoint_gets_api_suffix(void **state)
{
        static const char *const cases[][2] = {
                { "http://10.0.0.1:5240/MAAS", "http://10.0.0.1:5240/MAAS/api/2.0/" },
                { "http://10.0.0.1:5240/MAAS/", "http://10.0.0.1:5240/MAAS/api/2.0/" },
                { "https://maas.example/MAAS//", "https://maas.example/MAAS/api/2.0/" },
                { "http://h/MAAS/api/2.0", "http://h/MAAS/api/2.0/" },
                { "http://h/MAAS/api/2.0/", "http://h/MAAS/api/2.0/" },
                { "http://127.0.0.1:1", "http://127.0.0.1:1/api/2.0/" },
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *url = NULL;

                assert_int_equal(maas_endpoint_parse(cases[i][0], &url, NULL), 0);
                assert_string_equal(url, cases[i][1]);
                free(url);
        }
}

static void test_maas_auth__rejects_malformed_endpoints(void **state)
{
        static const char *const bad[] = {
                "",
                "10.0.0.1:5240/MAAS",
                "ftp://h/MAAS",
                "http://",
                "http:///MAAS",
                "http://h/MAAS?x=1",
                "http://h/MA AS",
                "http://h/MAAS#f",
        };

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *url = NULL, *err = NULL;

                assert_int_equal(maas_endpoint_parse(bad[i], &url, &err), CM_EINVAL);
                assert_null(url);
                assert_non_null(strstr(err, "MAAS endpoint is malformed"));
                free(err);
        }
}

static void test_maas_auth__header_is_plaintext_oauth(void **state)
{
        char ck[] = "ck", tk[] = "tk", ts[] = "s3cr3t";
        struct maas_credentials c = { .consumer_key = ck, .token_key = tk, .token_secret = ts };
        char *h;

        (void)state;
        h = maas_auth_header(&c, 1700000000, "abcdef");
        assert_true(strncmp(h, "Authorization: OAuth ", 21) == 0);
        assert_non_null(strstr(h, "oauth_consumer_key=\"ck\""));
        assert_non_null(strstr(h, "oauth_token=\"tk\""));
        assert_non_null(strstr(h, "oauth_signature_method=\"PLAINTEXT\""));
        assert_non_null(strstr(h, "oauth_signature=\"%26s3cr3t\""));
        assert_non_null(strstr(h, "oauth_timestamp=\"1700000000\""));
        assert_non_null(strstr(h, "oauth_nonce=\"abcdef\""));
        assert_non_null(strstr(h, "oauth_version=\"1.0\""));
        free(h);
}

static void test_maas_auth__header_escapes_values(void **state)
{
        char ck[] = "c k", tk[] = "t&k", ts[] = "a/b+c";
        struct maas_credentials c = { .consumer_key = ck, .token_key = tk, .token_secret = ts };
        char *h;

        (void)state;
        h = maas_auth_header(&c, 1, "n");
        assert_non_null(strstr(h, "oauth_consumer_key=\"c%20k\""));
        assert_non_null(strstr(h, "oauth_token=\"t%26k\""));
        assert_non_null(strstr(h, "oauth_signature=\"%26a%2Fb%2Bc\""));
        free(h);
}

static void test_maas_auth__nonce_is_fresh_hex(void **state)
{
        char a[33], b[33];

        (void)state;
        maas_auth_nonce(a);
        maas_auth_nonce(b);
        assert_int_equal(strlen(a), 32);
        assert_int_equal(strspn(a, "0123456789abcdef"), 32);
        assert_string_not_equal(a, b);
}

static void test_maas_auth__percent_encode_keeps_unreserved(void **state)
{
        char *e;

        (void)state;
        e = maas_percent_encode("AZaz09-._~ /=&+%");
        assert_string_equal(e, "AZaz09-._~%20%2F%3D%26%2B%25");
        free(e);
}

static void test_maas_auth__split_image_like_reference(void **state)
{
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(image_split_cases); i++) {
                const char *const *c = image_split_cases[i];
                char *os, *series;

                maas_split_image(c[0], &os, &series);
                assert_string_equal(os, c[1]);
                assert_string_equal(series, c[2]);
                free(os);
                free(series);
        }
}

static void test_maas_auth__config_combines_endpoint_and_key(void **state)
{
        struct maas_config cfg = { 0 };
        char *err = NULL;

        (void)state;
        assert_int_equal(maas_config_parse("http://h:5240/MAAS", "a:b:c", &cfg, &err), 0);
        assert_string_equal(cfg.base_url, "http://h:5240/MAAS/api/2.0/");
        assert_string_equal(cfg.creds.token_secret, "c");
        maas_config_release(&cfg);
        assert_int_equal(maas_config_parse("http://h:5240/MAAS", "a:b", &cfg, &err), CM_EINVAL);
        assert_null(cfg.base_url);
        free(err);
        err = NULL;
        assert_int_equal(maas_config_parse("h:5240", "a:b:c", &cfg, &err), CM_EINVAL);
        free(err);
}

/* A per-cluster identity's Secret (docs/credentials.md): endpoint and apiKey decoded, newlines
 * dropped, the bundle kept; each missing or wrong value named, never shown. */
static void test_maas_auth__identity_secret_named_field_errors(void **state)
{
        static const struct {
                const char *data, *want;
        } bad[] = {
                /* apiKey "c2VjcmV0LWtleTp4Onk=" = "secret-key:x:y" */
                { "\"apiKey\":\"c2VjcmV0LWtleTp4Onk=\"", "data.endpoint is missing" },
                { "\"endpoint\":\"aHR0cDovL2g6NTI0MC9NQUFT\"", "data.apiKey is missing" },
                { "\"endpoint\":\"aHR0cDovL2g6NTI0MC9NQUFT\",\"apiKey\":\"!!!\"",
                  "data.apiKey is not valid base64" },
                { "\"endpoint\":\"aHR0cDovL2g6NTI0MC9NQUFT\",\"apiKey\":\"c2VjcmV0LWtleTp4Onk=\","
                  "\"caBundle\":\"bm90IGEgY2VydA==\"",
                  "data.caBundle holds no PEM certificate" },
        };

        char *ep = NULL, *key = NULL, *ca = NULL, *msg = NULL;
        size_t ca_len = 0;
        cJSON *s;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *doc = xasprintf("{\"data\":{%s}}", bad[i].data);

                s = cJSON_Parse(doc);
                assert_int_equal(maas_secret_parse(s, &ep, &key, &ca, &ca_len, &msg), CM_EINVAL);
                assert_string_equal(msg, bad[i].want);
                assert_null(strstr(msg, "secret-key"));
                free(msg);
                msg = NULL;
                cJSON_Delete(s);
                free(doc);
        }
        /* "http://h:5240/MAAS\n", "a:b:c\n", a PEM header */
        s = cJSON_Parse("{\"data\":{\"endpoint\":\"aHR0cDovL2g6NTI0MC9NQUFTCg==\","
                        "\"apiKey\":\"YTpiOmMK\",\"caBundle\":"
                        "\"LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\"}}");
        assert_int_equal(maas_secret_parse(s, &ep, &key, &ca, &ca_len, &msg), 0);
        assert_string_equal(ep, "http://h:5240/MAAS");
        assert_string_equal(key, "a:b:c");
        assert_int_equal(ca_len, 28);
        assert_memory_equal(ca, "-----BEGIN CERTIFICATE-----", 27);
        free(ep);
        free(key);
        free(ca);
        cJSON_Delete(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_maas_auth__parses_three_part_key),
                cmocka_unit_test(test_maas_auth__rejects_malformed_keys_without_echoing_them),
                cmocka_unit_test(test_maas_auth__endpoint_gets_api_suffix),
                cmocka_unit_test(test_maas_auth__rejects_malformed_endpoints),
                cmocka_unit_test(test_maas_auth__header_is_plaintext_oauth),
                cmocka_unit_test(test_maas_auth__header_escapes_values),
                cmocka_unit_test(test_maas_auth__nonce_is_fresh_hex),
                cmocka_unit_test(test_maas_auth__percent_encode_keeps_unreserved),
                cmocka_unit_test(test_maas_auth__split_image_like_reference),
                cmocka_unit_test(test_maas_auth__config_combines_endpoint_and_key),
                cmocka_unit_test(test_maas_auth__identity_secret_named_field_errors),
        };

        return cmocka_run_group_tests_name("maas_auth", tests, NULL, NULL);
}
