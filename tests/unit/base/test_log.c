/*
 * log: record format (JSON and text), key/value splitting, escaping, truncation and
 * redaction of registered secrets and sensitive keys. Records are written to a pipe.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "log.h"
#include "xalloc.h"

static int fds[2];

static int setup(void **state)
{
        (void)state;
        if (pipe(fds) < 0)
                return -1;
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        log_clear_secrets();
        close(fds[0]);
        close(fds[1]);
        log_setup(LOG_FORMAT_JSON, 0, 2);
        return 0;
}

static char *read_record(void)
{
        char *buf = xcalloc(1, 65536);
        ssize_t n = read(fds[0], buf, 65535);

        assert_true(n > 0);
        return buf;
}

static void test_log__json_record_has_fields_and_typed_pairs(void **state)
{
        cJSON *j;
        char *rec;

        (void)state;
        log_setup(LOG_FORMAT_JSON, 0, fds[1]);
        log_info("https", "listening", "addr=%s port=%u note=%s", "127.0.0.1", 9443u,
                 "two words \"quoted\"");
        rec = read_record();
        assert_true(rec[strlen(rec) - 1] == '\n');
        j = cJSON_Parse(rec);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "info");
        assert_string_equal(cJSON_GetObjectItem(j, "logger")->valuestring, "https");
        assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "listening");
        assert_string_equal(cJSON_GetObjectItem(j, "addr")->valuestring, "127.0.0.1");
        assert_string_equal(cJSON_GetObjectItem(j, "port")->valuestring, "9443");
        assert_string_equal(cJSON_GetObjectItem(j, "note")->valuestring, "two words \"quoted\"");
        assert_non_null(strchr(cJSON_GetObjectItem(j, "ts")->valuestring, 'T'));
        cJSON_Delete(j);
        free(rec);
}

static void test_log__text_record_is_readable(void **state)
{
        char *rec;

        (void)state;
        log_setup(LOG_FORMAT_TEXT, 0, fds[1]);
        log_warn("maas", "slow answer", "op=%s seconds=%d", "allocate", 3);
        rec = read_record();
        assert_non_null(strstr(rec, "Z WARN maas slow answer op=allocate seconds=3\n"));
        free(rec);
}

static void test_log__verbosity_filters_debug(void **state)
{
        char *rec;

        (void)state;
        log_setup(LOG_FORMAT_TEXT, 0, fds[1]);
        log_debug("x", "hidden", "");
        log_info("x", "shown", "");
        rec = read_record();
        assert_null(strstr(rec, "hidden"));
        assert_non_null(strstr(rec, "shown"));
        free(rec);
        log_setup(LOG_FORMAT_TEXT, 1, fds[1]);
        log_debug("x", "now shown", "");
        rec = read_record();
        assert_non_null(strstr(rec, "now shown"));
        free(rec);
}

static void test_log__registered_secret_redacted_everywhere(void **state)
{
        char *rec;

        (void)state;
        log_setup(LOG_FORMAT_JSON, 0, fds[1]);
        log_add_secret("ck:tk:VerySecretValue");
        log_add_secret("VerySecretValue");
        log_error("maas", "call failed for ck:tk:VerySecretValue", "url=%s detail=%s",
                  "http://x/?oauth_signature=%26VerySecretValue", "VerySecretValue");
        rec = read_record();
        assert_null(strstr(rec, "VerySecretValue"));
        assert_non_null(strstr(rec, "[REDACTED]"));
        free(rec);
}

static void *register_later(void *arg)
{
        (void)log_add_secret(arg);
        return NULL;
}

/* A key read from a Secret while threads log: registered from another thread, it is
 * redacted in the next record; registering it again is a no-op that succeeds. */
static void test_log__secret_registered_at_run_time(void **state)
{
        static char key[] = "RotatedKey-2024";
        pthread_t t;
        char *rec;

        (void)state;
        log_setup(LOG_FORMAT_JSON, 0, fds[1]);
        assert_int_equal(pthread_create(&t, NULL, register_later, key), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_true(log_add_secret("RotatedKey-2024"));
        log_info("maas", "loaded RotatedKey-2024", "detail=%s", "RotatedKey-2024");
        rec = read_record();
        assert_null(strstr(rec, "RotatedKey-2024"));
        free(rec);
}

static void test_log__sensitive_keys_redacted(void **state)
{
        char *rec;

        (void)state;
        log_setup(LOG_FORMAT_TEXT, 0, fds[1]);
        log_info("kube", "auth", "bearer_token=%s Authorization=%s user=%s", "abc123xyz",
                 "Bearer abc123xyz", "alice");
        rec = read_record();
        assert_null(strstr(rec, "abc123xyz"));
        assert_non_null(strstr(rec, "user=alice"));
        free(rec);
}

static void test_log__control_characters_escaped_and_long_records_truncated(void **state)
{
        size_t n = 20000;
        char *big = xmalloc(n + 1);
        cJSON *j;
        char *rec;

        (void)state;
        memset(big, 'a', n);
        big[n] = '\0';
        log_setup(LOG_FORMAT_JSON, 0, fds[1]);
        log_info("x", "line\nbreak", "v=%s", big);
        rec = read_record();
        assert_true(strlen(rec) <= 8192);
        j = cJSON_Parse(rec);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "line\nbreak");
        assert_string_equal(cJSON_GetObjectItem(j, "truncated")->valuestring, "true");
        cJSON_Delete(j);
        free(rec);
        free(big);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_log__json_record_has_fields_and_typed_pairs,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_log__text_record_is_readable, setup, teardown),
                cmocka_unit_test_setup_teardown(test_log__verbosity_filters_debug, setup, teardown),
                cmocka_unit_test_setup_teardown(test_log__registered_secret_redacted_everywhere,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_log__sensitive_keys_redacted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_log__secret_registered_at_run_time, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_log__control_characters_escaped_and_long_records_truncated, setup,
                        teardown),
        };

        return cmocka_run_group_tests_name("log", tests, NULL, NULL);
}
