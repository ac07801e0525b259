/* Unit tests for parse: every parser's accepted forms, its rejections and its limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "parse.h"

static void test_parse_u64__accepts_digits_within_range(void **state)
{
        uint64_t v = 0;

        (void)state;
        assert_int_equal(parse_u64("0", 0, 10, &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(parse_u64("9443", 1, 65535, &v), 0);
        assert_int_equal(v, 9443);
        assert_int_equal(parse_u64("007", 0, 10, &v), 0);
        assert_int_equal(v, 7);
        assert_int_equal(parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
        assert_true(v == UINT64_MAX);
}

static void test_parse_u64__rejects_malformed_and_out_of_range(void **state)
{
        static const char *const bad[] = {
                "",
                " 1",
                "1 ",
                "+1",
                "-1",
                "0x10",
                "1e3",
                "1.0",
                "abc",
                "12abc",
                "18446744073709551616", /* 2^64 */
        };
        uint64_t v = 42;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse_u64(bad[i], 0, UINT64_MAX, &v), CM_EINVAL);
        assert_int_equal(parse_u64(NULL, 0, 1, &v), CM_EINVAL);
        assert_int_equal(parse_u64("0", 1, 65535, &v), CM_EINVAL);
        assert_int_equal(parse_u64("65536", 1, 65535, &v), CM_EINVAL);
        assert_int_equal(v, 42); /* untouched on failure */
}

static void test_parse_bool__accepts_go_strconv_set(void **state)
{
        static const char *const yes[] = { "1", "t", "T", "true", "TRUE", "True" };
        static const char *const no[] = { "0", "f", "F", "false", "FALSE", "False" };
        bool v;

        (void)state;
        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                v = false;
                assert_int_equal(parse_bool(yes[i], &v), 0);
                assert_true(v);
        }
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
                v = true;
                assert_int_equal(parse_bool(no[i], &v), 0);
                assert_false(v);
        }
}

static void test_parse_bool__rejects_other_words(void **state)
{
        static const char *const bad[] = { "", "yes", "no", "on", "off", "tRUE", "2", " true" };
        bool v = true;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse_bool(bad[i], &v), CM_EINVAL);
        assert_int_equal(parse_bool(NULL, &v), CM_EINVAL);
        assert_true(v);
}

static void test_parse_duration__accepts_go_forms(void **state)
{
        static const struct {
                const char *s;
                uint64_t ms;
        } cases[] = {
                { "0", 0 },
                { "0s", 0 },
                { "15s", 15000 },
                { "120m", 7200000 },
                { "1h30m", 5400000 },
                { "500ms", 500 },
                { "1.5h", 5400000 },
                { "1.5s", 1500 },
                { ".5s", 500 },
                { "1.s", 1000 },
                { "2h45m30s", 9930000 },
                { "1500us", 1 },
                { "1500\u00b5s", 1 },
                { "2000000ns", 2 },
                { "999us", 0 }, /* sub-millisecond parts are truncated */
                { "1h0m0s", 3600000 },
                { "2562047h", UINT64_C(2562047) * 3600000 }, /* near Go's maximum */
        };

        uint64_t v;

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                v = UINT64_MAX;
                assert_int_equal(parse_duration_ms(cases[i].s, &v), 0);
                assert_true(v == cases[i].ms);
        }
}

static void test_parse_duration__rejects_bad_forms(void **state)
{
        static const char *const bad[] = {
                "",
                "15",
                "-15s",
                "+15s",
                "15 s",
                " 15s",
                "15s ",
                "15x",
                "15sec",
                "s",
                ".s",
                "1..5s",
                "1h-5m",
                "1H",
                "3000000h", /* above Go's int64 nanoseconds */
                "99999999999999999999s",
                "18446744073709551615h",
        };
        uint64_t v = 7;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse_duration_ms(bad[i], &v), CM_EINVAL);
        assert_int_equal(parse_duration_ms(NULL, &v), CM_EINVAL);
        assert_int_equal(v, 7);
}

static void test_parse_size__accepts_bytes_and_binary_suffixes(void **state)
{
        uint64_t v;

        (void)state;
        assert_int_equal(parse_size("65536", &v), 0);
        assert_int_equal(v, 65536);
        assert_int_equal(parse_size("64Ki", &v), 0);
        assert_int_equal(v, 65536);
        assert_int_equal(parse_size("8Mi", &v), 0);
        assert_int_equal(v, 8 << 20);
        assert_int_equal(parse_size("2Gi", &v), 0);
        assert_true(v == (UINT64_C(2) << 30));
        assert_int_equal(parse_size("0", &v), 0);
        assert_int_equal(v, 0);
}

static void test_parse_size__rejects_bad_suffixes_and_overflow(void **state)
{
        static const char *const bad[] = {
                "",     "Mi", "8M",    "8MB", "8mi",
                "8 Mi", "-1", "1.5Mi", "8Ti", "17179869184Gi", /* 2^34 Gi = 2^64 */
        };
        uint64_t v = 3;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse_size(bad[i], &v), CM_EINVAL);
        assert_int_equal(v, 3);
}

static void test_parse_double__accepts_decimal_within_range(void **state)
{
        double v = 0;

        (void)state;
        assert_int_equal(parse_double("20", 0, 100, &v), 0);
        assert_true(v == 20.0);
        assert_int_equal(parse_double("0.5", 0, 100, &v), 0);
        assert_true(v == 0.5);
        assert_int_equal(parse_double(".25", 0, 100, &v), 0);
        assert_true(v == 0.25);
        assert_int_equal(parse_double("1e2", 0, 100, &v), 0);
        assert_true(v == 100.0);
}

static void test_parse_double__rejects_signs_specials_and_range(void **state)
{
        static const char *const bad[] = { "",    "-1",   "+1", " 1",    "1 ",  "inf",
                                           "nan", "0x10", "1e", "1e999", "1,5", "." };
        double v = 9;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse_double(bad[i], 0, 1e300, &v), CM_EINVAL);
        assert_int_equal(parse_double("101", 0, 100, &v), CM_EINVAL);
        assert_int_equal(parse_double("0.05", 0.1, 100, &v), CM_EINVAL);
        assert_true(v == 9.0);
}

static void assert_host_port(const char *addr, const char *host, uint16_t port)
{
        char *h = NULL;
        uint16_t p = 1;

        assert_int_equal(parse_host_port(addr, &h, &p), 0);
        assert_string_equal(h, host);
        assert_int_equal(p, port);
        free(h);
}

static void test_parse_host_port__accepts_listener_forms(void **state)
{
        (void)state;
        assert_host_port(":8080", "", 8080);
        assert_host_port("127.0.0.1:8080", "127.0.0.1", 8080);
        assert_host_port("[::1]:8080", "::1", 8080);
        assert_host_port("[fe80::1%eth0]:9440", "fe80::1%eth0", 9440);
        assert_host_port("localhost:0", "localhost", 0);
        assert_host_port("my-host.example:65535", "my-host.example", 65535);
}

static void test_parse_host_port__rejects_malformed(void **state)
{
        static const char *const bad[] = {
                "",       "0",        "8080",       "localhost", ":",       ":65536",
                ":-1",    "::1:8080", "[::1]",      "[::1]8080", "[]:80",   "[::1:80",
                "a b:80", "host:80x", "[zz::1]:80", "[::1%]:80", "h/st:80", ":+80",
        };
        char *h = NULL;
        uint16_t p = 7;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(parse_host_port(bad[i], &h, &p), CM_EINVAL);
        assert_int_equal(parse_host_port(NULL, &h, &p), CM_EINVAL);
        assert_null(h);
        assert_int_equal(p, 7);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_u64__accepts_digits_within_range),
                cmocka_unit_test(test_parse_u64__rejects_malformed_and_out_of_range),
                cmocka_unit_test(test_parse_bool__accepts_go_strconv_set),
                cmocka_unit_test(test_parse_bool__rejects_other_words),
                cmocka_unit_test(test_parse_duration__accepts_go_forms),
                cmocka_unit_test(test_parse_duration__rejects_bad_forms),
                cmocka_unit_test(test_parse_size__accepts_bytes_and_binary_suffixes),
                cmocka_unit_test(test_parse_size__rejects_bad_suffixes_and_overflow),
                cmocka_unit_test(test_parse_double__accepts_decimal_within_range),
                cmocka_unit_test(test_parse_double__rejects_signs_specials_and_range),
                cmocka_unit_test(test_parse_host_port__accepts_listener_forms),
                cmocka_unit_test(test_parse_host_port__rejects_malformed),
        };

        return cmocka_run_group_tests_name("parse", tests, NULL, NULL);
}
