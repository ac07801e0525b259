/* rfc3339: the times Kubernetes writes (metav1.Time, metav1.MicroTime) round-trip; what is
 * not such a time reads as -1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "rfc3339.h"

static void test_rfc3339__formats_utc_seconds(void **state)
{
        char out[RFC3339_LEN];

        (void)state;
        rfc3339_format(0, out);
        assert_string_equal(out, "1970-01-01T00:00:00Z");
        rfc3339_format(1767323045, out);
        assert_string_equal(out, "2026-01-02T03:04:05Z");
}

static void test_rfc3339__formats_microseconds(void **state)
{
        char out[RFC3339_MICRO_LEN];

        (void)state;
        rfc3339_format_micro(&(struct timespec){ .tv_sec = 1767323045, .tv_nsec = 123456789 }, out);
        assert_string_equal(out, "2026-01-02T03:04:05.123456Z");
        rfc3339_format_micro(&(struct timespec){ .tv_sec = 1767323045, .tv_nsec = 5000 }, out);
        assert_string_equal(out, "2026-01-02T03:04:05.000005Z");
        /* a nonsense fraction is not printed as one */
        rfc3339_format_micro(&(struct timespec){ .tv_sec = 1767323045, .tv_nsec = -1 }, out);
        assert_string_equal(out, "2026-01-02T03:04:05.000000Z");
}

static void test_rfc3339__parses_what_it_formats(void **state)
{
        char out[RFC3339_MICRO_LEN];

        (void)state;
        for (time_t t = 0; t < 4000000000; t += 86400 * 97 + 3607) {
                rfc3339_format(t, out);
                assert_int_equal(rfc3339_parse(out), t);
                rfc3339_format_micro(&(struct timespec){ .tv_sec = t, .tv_nsec = 999999999 }, out);
                assert_int_equal(rfc3339_parse(out), t);
        }
}

static void test_rfc3339__rejects_what_is_not_a_time(void **state)
{
        static const char *const bad[] = {
                "",
                "now",
                "2026-01-02",
                "2026-13-02T03:04:05Z",
                "2026-00-02T03:04:05Z",
                "2026-01-32T03:04:05Z",
                "2026-01-02T24:00:00Z",
                "2026-01-02T03:60:05Z",
                "2026-01-02 03:04:05Z",
                "T03:04:05Z",
        };

        (void)state;
        assert_int_equal(rfc3339_parse(NULL), -1);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(rfc3339_parse(bad[i]), -1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rfc3339__formats_utc_seconds),
                cmocka_unit_test(test_rfc3339__formats_microseconds),
                cmocka_unit_test(test_rfc3339__parses_what_it_formats),
                cmocka_unit_test(test_rfc3339__rejects_what_is_not_a_time),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
