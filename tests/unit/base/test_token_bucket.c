/*
 * token_bucket: the burst, then one token per 1/qps; reservations queue behind each other;
 * a hold (a server's Retry-After) delays every reservation until it ends; the counters.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "metrics.h"
#include "token_bucket.h"

static void test_token_bucket__burst_then_qps(void **state)
{
        struct clock_fake fc;
        struct token_bucket *tb = NULL;

        (void)state;
        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(token_bucket_new(10, 3, &fc.ops, &tb), 0);
        for (int i = 0; i < 3; i++)
                assert_int_equal(token_bucket_reserve(tb), 0);
        assert_int_equal(token_bucket_reserve(tb), 100); /* 1/qps later */
        assert_int_equal(token_bucket_reserve(tb), 200); /* queued behind the previous */
        clock_fake_advance(&fc, 1000);                   /* 10 tokens earned, 2 owed */
        for (int i = 0; i < 3; i++)                      /* refilled only up to the burst */
                assert_int_equal(token_bucket_reserve(tb), 0);
        assert_int_equal(token_bucket_reserve(tb), 100);
        token_bucket_free(tb);
}

static void test_token_bucket__unlimited_and_null_are_free(void **state)
{
        struct clock_fake fc;
        struct token_bucket *tb = NULL;

        (void)state;
        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(token_bucket_new(0, 1, &fc.ops, &tb), 0);
        for (int i = 0; i < 1000; i++)
                assert_int_equal(token_bucket_reserve(tb), 0);
        assert_int_equal(token_bucket_reserve(NULL), 0);
        assert_int_equal(token_bucket_wait(NULL), 0);
        token_bucket_hold(NULL, 5000);
        assert_int_equal(token_bucket_new((double)NAN, 1, NULL, &tb), CM_EINVAL);
        token_bucket_free(tb);
}

static void test_token_bucket__hold_delays_every_reservation(void **state)
{
        struct clock_fake fc;
        struct token_bucket *tb = NULL;
        struct token_bucket_stats st;

        (void)state;
        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(token_bucket_new(100, 10, &fc.ops, &tb), 0);
        token_bucket_hold(tb, 3000);
        assert_int_equal(token_bucket_reserve(tb), 3000); /* tokens in hand, yet held */
        token_bucket_hold(tb, 1000);                      /* a shorter hold changes nothing */
        clock_fake_advance(&fc, 2000);
        assert_int_equal(token_bucket_reserve(tb), 1000);
        clock_fake_advance(&fc, 1000);
        assert_int_equal(token_bucket_reserve(tb), 0); /* the hold is over */
        token_bucket_stats(tb, &st);
        assert_int_equal(st.reservations, 3);
        assert_int_equal(st.delayed, 2);
        assert_int_equal(st.wait_ms, 4000);
        assert_int_equal(st.holds, 1);
        token_bucket_free(tb);
}

static void test_token_bucket__hold_applies_without_a_rate(void **state)
{
        struct clock_fake fc;
        struct token_bucket *tb = NULL;

        (void)state;
        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(token_bucket_new(0, 0, &fc.ops, &tb), 0); /* --maas-api-qps 0 */
        token_bucket_hold(tb, 500);
        assert_int_equal(token_bucket_reserve(tb), 500);
        token_bucket_free(tb);
}

static void test_token_bucket__exported_counters(void **state)
{
        struct clock_fake fc;
        struct token_bucket *tb = NULL;
        struct metrics *m = NULL;
        struct buf out;

        (void)state;
        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(token_bucket_new(2, 1, &fc.ops, &tb), 0);
        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(token_bucket_export(tb, m, "maas"), 0);
        (void)token_bucket_reserve(tb);
        (void)token_bucket_reserve(tb); /* 500 ms */
        token_bucket_hold(tb, 2000);
        (void)token_bucket_reserve(tb); /* 2000 ms */
        buf_init(&out, 1 << 20);
        assert_int_equal(metrics_render(m, &out), 0);
        assert_non_null(strstr(out.data, "capmaas_client_budget_requests_total{api=\"maas\"} 3\n"));
        assert_non_null(strstr(out.data, "capmaas_client_budget_delayed_total{api=\"maas\"} 2\n"));
        assert_non_null(
                strstr(out.data, "capmaas_client_budget_wait_seconds_total{api=\"maas\"} 2.5\n"));
        assert_non_null(strstr(out.data, "capmaas_client_budget_holds_total{api=\"maas\"} 1\n"));
        buf_release(&out);
        metrics_free(m);
        token_bucket_free(tb);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_token_bucket__burst_then_qps),
                cmocka_unit_test(test_token_bucket__unlimited_and_null_are_free),
                cmocka_unit_test(test_token_bucket__hold_delays_every_reservation),
                cmocka_unit_test(test_token_bucket__hold_applies_without_a_rate),
                cmocka_unit_test(test_token_bucket__exported_counters),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
