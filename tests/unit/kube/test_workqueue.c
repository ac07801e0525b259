/*
 * Unit tests for the work queue: client-go queue semantics (dedup, FIFO, dirty re-queue,
 * one worker per key), delays on a fake clock, the default controller rate limiter,
 * shutdown, metrics counters, and leak-free teardown. Threaded tests bound every wait.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "clock.h"
#include "err.h"
#include "workqueue.h"

#define JOIN_BOUND_MS 5000

struct tctx {
        struct clock_fake clk;
        struct workqueue *q;
};

static int setup(void **state)
{
        struct tctx *t = calloc(1, sizeof(*t));

        assert_non_null(t);
        clock_fake_init(&t->clk, 1000, 1700000000);
        assert_int_equal(workqueue_new(&(struct workqueue_opts){ .clock = &t->clk.ops }, &t->q), 0);
        *state = t;
        return 0;
}

static int teardown(void **state)
{
        struct tctx *t = *state;

        t->q = workqueue_free(t->q);
        free(t);
        return 0;
}

/* Takes a ready key without sleeping and checks it is `want`; leaves it processing. */
static void get_expect(struct workqueue *q, const char *want)
{
        char *key = NULL;

        assert_int_equal(workqueue_get_timeout(q, 0, &key), 0);
        assert_string_equal(key, want);
        free(key);
}

static void get_expect_done(struct workqueue *q, const char *want)
{
        get_expect(q, want);
        workqueue_done(q, want);
}

static void expect_nothing_ready(struct workqueue *q)
{
        char *key = NULL;

        assert_int_equal(workqueue_get_timeout(q, 0, &key), CM_ETIMEDOUT);
        assert_null(key);
}

/* Asserts key becomes ready exactly delay_ms after now on the fake clock, then takes it. */
static void expect_ready_after(struct tctx *t, const char *key, uint64_t delay_ms)
{
        clock_fake_advance(&t->clk, delay_ms - 1);
        expect_nothing_ready(t->q);
        clock_fake_advance(&t->clk, 1);
        get_expect_done(t->q, key);
}

static uint64_t mono_ms(void)
{
        return clock_now_ms(NULL);
}

/* Polls (bounded) until n threads are blocked inside workqueue_get. */
static void wait_for_waiters(struct workqueue *q, uint64_t n)
{
        uint64_t until = mono_ms() + JOIN_BOUND_MS;
        struct workqueue_stats st;

        for (;;) {
                workqueue_stats(q, &st);
                if (st.waiters >= n)
                        return;
                assert_true(mono_ms() < until);
                nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
        }
}

static int join_within(pthread_t th, unsigned ms)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += ms / 1000;
        ts.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
        }
        return pthread_timedjoin_np(th, NULL, &ts);
}

/* ---- single-threaded semantics ---- */

static void test_workqueue__dedups_pending_key(void **state)
{
        struct tctx *t = *state;
        struct workqueue_stats st;

        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add(t->q, "ns/b"), 0);
        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_len(t->q), 2);
        get_expect_done(t->q, "ns/a");
        get_expect_done(t->q, "ns/b");
        expect_nothing_ready(t->q);
        workqueue_stats(t->q, &st);
        assert_int_equal(st.adds_total, 2);
}

static void test_workqueue__hands_out_keys_in_fifo_order(void **state)
{
        struct tctx *t = *state;
        static const char *const keys[] = { "ns/c", "ns/a", "x/b", "ns/d", "ns/aa" };

        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                assert_int_equal(workqueue_add(t->q, keys[i]), 0);
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++)
                get_expect_done(t->q, keys[i]);
        expect_nothing_ready(t->q);
}

static void test_workqueue__requeues_key_added_while_processing_once(void **state)
{
        struct tctx *t = *state;

        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add(t->q, "ns/b"), 0);
        get_expect(t->q, "ns/a");
        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        /* Not handed out again while the first worker still has it. */
        get_expect(t->q, "ns/b");
        expect_nothing_ready(t->q);
        workqueue_done(t->q, "ns/a");
        assert_int_equal(workqueue_len(t->q), 1);
        get_expect_done(t->q, "ns/a");
        workqueue_done(t->q, "ns/b");
        expect_nothing_ready(t->q);
}

static void test_workqueue__done_of_unknown_key_is_ignored(void **state)
{
        struct tctx *t = *state;
        struct workqueue_stats st;

        workqueue_done(t->q, "ns/never");
        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        /* Waiting but not processing: done must not drop or duplicate it. */
        workqueue_done(t->q, "ns/a");
        get_expect_done(t->q, "ns/a");
        expect_nothing_ready(t->q);
        workqueue_stats(t->q, &st);
        assert_int_equal(st.processing, 0);
        assert_int_equal(st.work_count, 1);
}

static void test_workqueue__rejects_empty_and_oversized_keys(void **state)
{
        struct tctx *t = *state;
        char key[WORKQUEUE_MAX_KEY + 2];

        memset(key, 'k', sizeof(key));
        key[WORKQUEUE_MAX_KEY] = '\0';
        assert_int_equal(workqueue_add(t->q, key), 0);
        get_expect_done(t->q, key);
        key[WORKQUEUE_MAX_KEY] = 'k';
        key[WORKQUEUE_MAX_KEY + 1] = '\0';
        assert_int_equal(workqueue_add(t->q, key), CM_EINVAL);
        assert_int_equal(workqueue_add_after(t->q, key, 10), CM_EINVAL);
        assert_int_equal(workqueue_add_rate_limited(t->q, key), CM_EINVAL);
        assert_int_equal(workqueue_add(t->q, ""), CM_EINVAL);
        assert_int_equal(workqueue_len(t->q), 0);
}

static void test_workqueue__new_rejects_base_delay_above_max(void **state)
{
        struct workqueue *q = NULL;

        (void)state;
        assert_int_equal(
                workqueue_new(&(struct workqueue_opts){ .base_delay_ms = 50, .max_delay_ms = 10 },
                              &q),
                CM_EINVAL);
        assert_null(q);
        assert_int_equal(workqueue_new(NULL, &q), 0);
        q = workqueue_free(q);
        assert_null(workqueue_free(NULL));
}

/* ---- delays on the fake clock ---- */

static void test_workqueue__add_after_orders_by_due_time(void **state)
{
        struct tctx *t = *state;

        assert_int_equal(workqueue_add_after(t->q, "ns/a", 30), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/b", 10), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/c", 20), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/d", 20), 0);
        expect_nothing_ready(t->q);
        expect_ready_after(t, "ns/b", 10);
        clock_fake_advance(&t->clk, 10);
        /* Equal due times come out in the order they were added. */
        get_expect_done(t->q, "ns/c");
        get_expect_done(t->q, "ns/d");
        expect_ready_after(t, "ns/a", 10);
        expect_nothing_ready(t->q);
}

static void test_workqueue__add_after_sooner_moves_earlier_later_keeps_earlier(void **state)
{
        struct tctx *t = *state;
        struct workqueue_stats st;

        assert_int_equal(workqueue_add_after(t->q, "ns/a", 100), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/a", 40), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/b", 50), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/b", 500), 0);
        workqueue_stats(t->q, &st);
        assert_int_equal(st.delayed, 2);
        expect_ready_after(t, "ns/a", 40);
        expect_ready_after(t, "ns/b", 10);
        /* The superseded later times must not fire a second time. */
        clock_fake_advance(&t->clk, 1000);
        expect_nothing_ready(t->q);
}

static void test_workqueue__add_after_zero_is_immediate_and_dedups(void **state)
{
        struct tctx *t = *state;

        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/a", 0), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/b", 0), 0);
        assert_int_equal(workqueue_len(t->q), 2);
        /* A delayed copy of a waiting key is de-duplicated when it fires. */
        assert_int_equal(workqueue_add_after(t->q, "ns/a", 5), 0);
        clock_fake_advance(&t->clk, 5);
        assert_int_equal(workqueue_len(t->q), 2);
        get_expect_done(t->q, "ns/a");
        get_expect_done(t->q, "ns/b");
        expect_nothing_ready(t->q);
}

/* ---- rate limiter ---- */

static void test_workqueue__rate_limited_delays_double_until_cap(void **state)
{
        struct tctx *t = *state;
        uint64_t d = 5;

        for (unsigned n = 0; n < 22; n++) {
                assert_int_equal(workqueue_add_rate_limited(t->q, "ns/a"), 0);
                assert_int_equal(workqueue_num_requeues(t->q, "ns/a"), n + 1);
                expect_ready_after(t, "ns/a", d);
                d = d * 2 > 1000000 ? 1000000 : d * 2;
        }
        assert_int_equal(d, 1000000);
}

static void test_workqueue__forget_resets_backoff(void **state)
{
        struct tctx *t = *state;

        for (unsigned n = 0; n < 3; n++) {
                assert_int_equal(workqueue_add_rate_limited(t->q, "ns/a"), 0);
                expect_ready_after(t, "ns/a", 5U << n);
        }
        assert_int_equal(workqueue_num_requeues(t->q, "ns/a"), 3);
        assert_int_equal(workqueue_num_requeues(t->q, "ns/other"), 0);
        workqueue_forget(t->q, "ns/a");
        assert_int_equal(workqueue_num_requeues(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add_rate_limited(t->q, "ns/a"), 0);
        expect_ready_after(t, "ns/a", 5);
}

static void test_workqueue__token_bucket_delays_adds_after_burst(void **state)
{
        struct tctx *t = *state;
        char key[32];

        for (int i = 0; i < 102; i++) {
                (void)snprintf(key, sizeof(key), "ns/k%d", i);
                assert_int_equal(workqueue_add_rate_limited(t->q, key), 0);
        }
        /* 100 tokens: the first 100 keys wait only their 5 ms per-key delay. */
        clock_fake_advance(&t->clk, 5);
        assert_int_equal(workqueue_len(t->q), 100);
        /* Then 10 tokens/s: key 101 owes one token (100 ms), key 102 two (200 ms). */
        clock_fake_advance(&t->clk, 94);
        assert_int_equal(workqueue_len(t->q), 100);
        clock_fake_advance(&t->clk, 1);
        assert_int_equal(workqueue_len(t->q), 101);
        clock_fake_advance(&t->clk, 99);
        assert_int_equal(workqueue_len(t->q), 101);
        clock_fake_advance(&t->clk, 1);
        assert_int_equal(workqueue_len(t->q), 102);
}

static void test_workqueue__token_bucket_refills_at_ten_per_second(void **state)
{
        struct tctx *t = *state;
        char key[32];

        for (int i = 0; i < 100; i++) {
                (void)snprintf(key, sizeof(key), "ns/k%d", i);
                assert_int_equal(workqueue_add_rate_limited(t->q, key), 0);
        }
        /* One second refills 10 tokens: 10 more keys get only the per-key delay. */
        clock_fake_advance(&t->clk, 1000);
        for (int i = 100; i < 111; i++) {
                (void)snprintf(key, sizeof(key), "ns/k%d", i);
                assert_int_equal(workqueue_add_rate_limited(t->q, key), 0);
        }
        clock_fake_advance(&t->clk, 5);
        assert_int_equal(workqueue_len(t->q), 110);
        clock_fake_advance(&t->clk, 95);
        assert_int_equal(workqueue_len(t->q), 111);
}

/* ---- metrics ---- */

static void test_workqueue__stats_track_depth_adds_retries_and_durations(void **state)
{
        struct tctx *t = *state;
        struct workqueue_stats st;

        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add(t->q, "ns/b"), 0);
        assert_int_equal(workqueue_add_rate_limited(t->q, "ns/c"), 0);
        workqueue_stats(t->q, &st);
        assert_int_equal(st.depth, 2);
        assert_int_equal(st.delayed, 1);
        assert_int_equal(st.adds_total, 2);
        assert_int_equal(st.retries_total, 1);
        clock_fake_advance(&t->clk, 7);
        get_expect(t->q, "ns/a");
        clock_fake_advance(&t->clk, 3);
        workqueue_done(t->q, "ns/a");
        workqueue_stats(t->q, &st);
        assert_int_equal(st.depth, 2); /* ns/b, and ns/c became due */
        assert_int_equal(st.adds_total, 3);
        assert_int_equal(st.processing, 0);
        assert_int_equal(st.queue_count, 1);
        assert_int_equal(st.queue_ms_sum, 7);
        assert_int_equal(st.queue_ms_max, 7);
        assert_int_equal(st.work_count, 1);
        assert_int_equal(st.work_ms_sum, 3);
        get_expect(t->q, "ns/b");
        clock_fake_advance(&t->clk, 4);
        get_expect(t->q, "ns/c");
        clock_fake_advance(&t->clk, 2);
        workqueue_stats(t->q, &st);
        assert_int_equal(st.processing, 2);
        assert_int_equal(st.queue_ms_max, 10); /* ns/b: added at 0, taken at 10 */
        assert_int_equal(st.unfinished_ms, 6 + 2);
        assert_int_equal(st.longest_ms, 6);
        workqueue_done(t->q, "ns/b");
        workqueue_done(t->q, "ns/c");
        workqueue_stats(t->q, &st);
        assert_int_equal(st.unfinished_ms, 0);
        assert_int_equal(st.longest_ms, 0);
}

/* ---- shutdown and teardown ---- */

static void test_workqueue__shutdown_drains_waiting_keys_then_reports_shutdown(void **state)
{
        struct tctx *t = *state;
        char *key = NULL;

        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        assert_int_equal(workqueue_add(t->q, "ns/b"), 0);
        assert_int_equal(workqueue_add_after(t->q, "ns/later", 10), 0);
        get_expect(t->q, "ns/a");
        assert_int_equal(workqueue_add(t->q, "ns/a"), 0);
        workqueue_shutdown(t->q);
        workqueue_shutdown(t->q);
        assert_true(workqueue_is_shutting_down(t->q));
        assert_int_equal(workqueue_add(t->q, "ns/c"), CM_ESHUTDOWN);
        assert_int_equal(workqueue_add_after(t->q, "ns/c", 5), CM_ESHUTDOWN);
        assert_int_equal(workqueue_add_rate_limited(t->q, "ns/c"), CM_ESHUTDOWN);
        get_expect_done(t->q, "ns/b");
        /* Dirtied before shutdown: re-queued by done, as client-go does. */
        workqueue_done(t->q, "ns/a");
        get_expect_done(t->q, "ns/a");
        clock_fake_advance(&t->clk, 10);
        assert_int_equal(workqueue_get(t->q, &key), CM_ESHUTDOWN);
        assert_int_equal(workqueue_get_timeout(t->q, 1000, &key), CM_ESHUTDOWN);
        assert_null(key);
}

struct getter {
        pthread_t th;
        struct workqueue *q;
        char *key;
        int r;
};

static void *getter_main(void *arg)
{
        struct getter *g = arg;

        g->r = workqueue_get(g->q, &g->key);
        return NULL;
}

static void test_workqueue__shutdown_wakes_blocked_getters(void **state)
{
        struct tctx *t = *state;
        struct getter g[3];

        for (size_t i = 0; i < ARRAY_SIZE(g); i++) {
                g[i] = (struct getter){ .q = t->q, .r = 1 };
                assert_int_equal(pthread_create(&g[i].th, NULL, getter_main, &g[i]), 0);
        }
        /* A parked key must not keep them waiting either. */
        assert_int_equal(workqueue_add_after(t->q, "ns/later", 100000), 0);
        wait_for_waiters(t->q, ARRAY_SIZE(g));
        workqueue_shutdown(t->q);
        for (size_t i = 0; i < ARRAY_SIZE(g); i++) {
                assert_int_equal(join_within(g[i].th, JOIN_BOUND_MS), 0);
                assert_int_equal(g[i].r, CM_ESHUTDOWN);
                assert_null(g[i].key);
        }
}

static void test_workqueue__tick_wakes_getter_after_fake_clock_advance(void **state)
{
        struct tctx *t = *state;
        struct getter g = { .q = t->q, .r = 1 };

        /* 1000 s of fake time: without tick the getter would sleep 1000 s of real time. */
        assert_int_equal(workqueue_add_after(t->q, "ns/a", 1000000), 0);
        assert_int_equal(pthread_create(&g.th, NULL, getter_main, &g), 0);
        wait_for_waiters(t->q, 1);
        clock_fake_advance(&t->clk, 1000000);
        workqueue_tick(t->q);
        assert_int_equal(join_within(g.th, JOIN_BOUND_MS), 0);
        assert_int_equal(g.r, 0);
        assert_string_equal(g.key, "ns/a");
        workqueue_done(t->q, g.key);
        free(g.key);
}

static void test_workqueue__free_with_pending_and_delayed_keys_does_not_leak(void **state)
{
        struct tctx *t = *state;
        char key[32];

        /* Enough keys to grow the hash table and the delay heap several times. */
        for (int i = 0; i < 500; i++) {
                (void)snprintf(key, sizeof(key), "ns/k%d", i);
                assert_int_equal(workqueue_add(t->q, key), 0);
                (void)snprintf(key, sizeof(key), "ns/d%d", i);
                assert_int_equal(workqueue_add_after(t->q, key, (uint64_t)(1000 - i)), 0);
                (void)snprintf(key, sizeof(key), "ns/r%d", i);
                assert_int_equal(workqueue_add_rate_limited(t->q, key), 0);
        }
        get_expect(t->q, "ns/k0");
        assert_int_equal(workqueue_add(t->q, "ns/k0"), 0);
        /* teardown frees the queue; LeakSanitizer fails the binary on any leak. */
}

/* ---- real clock ---- */

static void test_workqueue__get_timeout_expires_in_real_time(void **state)
{
        struct workqueue *q = NULL;
        char *key = NULL;
        uint64_t t0;

        (void)state;
        assert_int_equal(workqueue_new(NULL, &q), 0);
        t0 = mono_ms();
        assert_int_equal(workqueue_get_timeout(q, 30, &key), CM_ETIMEDOUT);
        assert_true(mono_ms() - t0 >= 30);
        assert_null(key);
        q = workqueue_free(q);
}

static void test_workqueue__delayed_key_wakes_blocked_getter_in_real_time(void **state)
{
        struct workqueue *q = NULL;
        struct getter g = { .r = 1 };
        uint64_t t0;

        (void)state;
        assert_int_equal(workqueue_new(NULL, &q), 0);
        g.q = q;
        assert_int_equal(pthread_create(&g.th, NULL, getter_main, &g), 0);
        wait_for_waiters(q, 1);
        /* The getter sleeps with no timeout; the new earliest due time must re-arm it. */
        t0 = mono_ms();
        assert_int_equal(workqueue_add_after(q, "ns/a", 20), 0);
        assert_int_equal(join_within(g.th, JOIN_BOUND_MS), 0);
        assert_true(mono_ms() - t0 >= 20);
        assert_int_equal(g.r, 0);
        assert_string_equal(g.key, "ns/a");
        workqueue_done(q, g.key);
        free(g.key);
        q = workqueue_free(q);
}

/* ---- concurrency ---- */

#define HAMMER_KEYS      5
#define HAMMER_PRODUCERS 4
#define HAMMER_CONSUMERS 4
#define HAMMER_ADDS      20000

struct hammer {
        struct workqueue *q;
        _Atomic uint64_t seq;
        _Atomic uint64_t last_add[HAMMER_KEYS];   /* seq taken just before the last add */
        _Atomic uint64_t last_start[HAMMER_KEYS]; /* seq taken when processing last began */
        _Atomic int busy[HAMMER_KEYS];
        _Atomic unsigned overlaps;
        _Atomic unsigned errors;
        _Atomic unsigned processed;
};

struct hammer_thread {
        pthread_t th;
        struct hammer *h;
        unsigned seed;
};

static const char *const hammer_keys[HAMMER_KEYS] = { "ns/k0", "ns/k1", "ns/k2", "ns/k3", "ns/k4" };

static void atomic_max_u64(_Atomic uint64_t *v, uint64_t x)
{
        uint64_t cur = atomic_load(v);

        while (cur < x && !atomic_compare_exchange_weak(v, &cur, x))
                ;
}

/* Adds key k, recording when if the queue accepted it. */
static void hammer_add(struct hammer *h, unsigned k)
{
        uint64_t s = atomic_fetch_add(&h->seq, 1);
        int r = workqueue_add(h->q, hammer_keys[k]);

        if (r == 0)
                atomic_max_u64(&h->last_add[k], s);
        else if (r != CM_ESHUTDOWN)
                atomic_fetch_add(&h->errors, 1);
}

static void *producer_main(void *arg)
{
        struct hammer_thread *ht = arg;

        for (int i = 0; i < HAMMER_ADDS; i++)
                hammer_add(ht->h, (unsigned)rand_r(&ht->seed) % HAMMER_KEYS);
        return NULL;
}

static void hammer_process(struct hammer_thread *ht, const char *key)
{
        struct hammer *h = ht->h;
        unsigned k = (unsigned)(key[strlen(key) - 1] - '0');

        if (k >= HAMMER_KEYS) {
                atomic_fetch_add(&h->errors, 1);
                return;
        }
        atomic_store(&h->last_start[k], atomic_fetch_add(&h->seq, 1));
        if (atomic_exchange(&h->busy[k], 1) != 0)
                atomic_fetch_add(&h->overlaps, 1);
        if (rand_r(&ht->seed) % 8 == 0)
                hammer_add(h, k); /* dirty while processing */
        sched_yield();
        atomic_store(&h->busy[k], 0);
        workqueue_done(h->q, key);
        atomic_fetch_add(&h->processed, 1);
}

static void *consumer_main(void *arg)
{
        struct hammer_thread *ht = arg;
        char *key = NULL;
        int r;

        while ((r = workqueue_get(ht->h->q, &key)) == 0) {
                hammer_process(ht, key);
                free(key);
                key = NULL;
        }
        if (r != CM_ESHUTDOWN)
                atomic_fetch_add(&ht->h->errors, 1);
        return NULL;
}

static void test_workqueue__never_hands_one_key_to_two_workers(void **state)
{
        struct tctx *t = *state;
        struct hammer *h = calloc(1, sizeof(*h));
        struct hammer_thread prod[HAMMER_PRODUCERS];
        struct hammer_thread cons[HAMMER_CONSUMERS];
        struct workqueue_stats st;

        assert_non_null(h);
        h->q = t->q;
        atomic_store(&h->seq, 1);
        for (unsigned i = 0; i < HAMMER_CONSUMERS; i++) {
                cons[i] = (struct hammer_thread){ .h = h, .seed = 100 + i };
                assert_int_equal(pthread_create(&cons[i].th, NULL, consumer_main, &cons[i]), 0);
        }
        for (unsigned i = 0; i < HAMMER_PRODUCERS; i++) {
                prod[i] = (struct hammer_thread){ .h = h, .seed = 200 + i };
                assert_int_equal(pthread_create(&prod[i].th, NULL, producer_main, &prod[i]), 0);
        }
        for (unsigned i = 0; i < HAMMER_PRODUCERS; i++)
                assert_int_equal(join_within(prod[i].th, 20000), 0);
        /* Consumers drain everything accepted before shutdown, then see CM_ESHUTDOWN. */
        workqueue_shutdown(t->q);
        for (unsigned i = 0; i < HAMMER_CONSUMERS; i++)
                assert_int_equal(join_within(cons[i].th, 20000), 0);

        assert_int_equal(atomic_load(&h->overlaps), 0);
        assert_int_equal(atomic_load(&h->errors), 0);
        assert_true(atomic_load(&h->processed) > 0);
        for (unsigned k = 0; k < HAMMER_KEYS; k++) {
                assert_true(atomic_load(&h->last_add[k]) > 0);
                /* Every accepted add was followed by a processing that began after it. */
                assert_true(atomic_load(&h->last_start[k]) > atomic_load(&h->last_add[k]));
        }
        workqueue_stats(t->q, &st);
        assert_int_equal(st.depth, 0);
        assert_int_equal(st.processing, 0);
        free(h);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        const struct CMUnitTest tests[] = {
                T(test_workqueue__dedups_pending_key),
                T(test_workqueue__hands_out_keys_in_fifo_order),
                T(test_workqueue__requeues_key_added_while_processing_once),
                T(test_workqueue__done_of_unknown_key_is_ignored),
                T(test_workqueue__rejects_empty_and_oversized_keys),
                cmocka_unit_test(test_workqueue__new_rejects_base_delay_above_max),
                T(test_workqueue__add_after_orders_by_due_time),
                T(test_workqueue__add_after_sooner_moves_earlier_later_keeps_earlier),
                T(test_workqueue__add_after_zero_is_immediate_and_dedups),
                T(test_workqueue__rate_limited_delays_double_until_cap),
                T(test_workqueue__forget_resets_backoff),
                T(test_workqueue__token_bucket_delays_adds_after_burst),
                T(test_workqueue__token_bucket_refills_at_ten_per_second),
                T(test_workqueue__stats_track_depth_adds_retries_and_durations),
                T(test_workqueue__shutdown_drains_waiting_keys_then_reports_shutdown),
                T(test_workqueue__shutdown_wakes_blocked_getters),
                T(test_workqueue__tick_wakes_getter_after_fake_clock_advance),
                T(test_workqueue__free_with_pending_and_delayed_keys_does_not_leak),
                cmocka_unit_test(test_workqueue__get_timeout_expires_in_real_time),
                cmocka_unit_test(test_workqueue__delayed_key_wakes_blocked_getter_in_real_time),
                T(test_workqueue__never_hands_one_key_to_two_workers),
        };
#undef T

        return cmocka_run_group_tests_name("workqueue", tests, NULL, NULL);
}
