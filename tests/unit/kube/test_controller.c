/*
 * Unit tests for the controller runtime: how each reconcile result re-queues the key (on a
 * fake clock, delays checked to the millisecond), one key never reconciled by two of 8
 * workers at once (ctest: concurrency; run under TSan), per-worker state, informer events
 * mapped to keys, and the controller-runtime metric names. Every wait is bounded.
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

#include "../../../kube/informer_priv.h"
#include "buf.h"
#include "clock.h"
#include "controller.h"
#include "err.h"
#include "informer.h"
#include "kube_client.h"
#include "metrics.h"
#include "workqueue.h"

#define WAIT_MS  10000
#define MAX_KEYS 64

struct step {
        int err;
        enum reconcile_outcome outcome;
        uint64_t after_ms;
};

struct seen {
        char key[64];
        unsigned count;
};

struct fx {
        struct clock_fake clk;
        struct metrics *m;
        struct controller *c;
        pthread_mutex_t mu;
        pthread_cond_t cond;
        unsigned calls;             /* guarded by mu */
        struct seen seen[MAX_KEYS]; /* guarded by mu */
        size_t n_seen;              /* guarded by mu */
        const struct step *script;  /* read-only while workers run */
        size_t n_script;
        atomic_int inflight[MAX_KEYS]; /* concurrency test */
        atomic_uint violations;
        atomic_uint total;
        atomic_uint news, frees;
        atomic_uint idx_mask;
        atomic_uint bad_ctx;
};

struct wctx {
        unsigned magic;
        unsigned idx;
        struct fx *f;
};

#define WCTX_MAGIC 0x5eed

static void *w_new(void *arg, unsigned idx)
{
        struct fx *f = arg;
        struct wctx *w = calloc(1, sizeof(*w));

        w->magic = WCTX_MAGIC;
        w->idx = idx;
        w->f = f;
        atomic_fetch_add(&f->news, 1);
        atomic_fetch_or(&f->idx_mask, 1u << idx);
        return w;
}

static void w_free(void *p)
{
        struct wctx *w = p;

        if (w->magic != WCTX_MAGIC)
                atomic_fetch_add(&w->f->bad_ctx, 1);
        atomic_fetch_add(&w->f->frees, 1);
        w->magic = 0;
        free(w);
}

static void record(struct fx *f, const char *ns, const char *name)
{
        char key[64];
        size_t i;

        snprintf(key, sizeof(key), "%s|%s", ns, name);
        for (i = 0; i < f->n_seen; i++)
                if (!strcmp(f->seen[i].key, key))
                        break;
        if (i == f->n_seen && i < MAX_KEYS) {
                snprintf(f->seen[i].key, sizeof(f->seen[i].key), "%s", key);
                f->n_seen++;
        }
        if (i < MAX_KEYS)
                f->seen[i].count++;
}

/* Follows the script (then DONE), records ns|name, signals the test. */
static int rec_reconcile(void *wctx, const char *ns, const char *name, struct reconcile_result *res)
{
        struct wctx *w = wctx;
        struct fx *f = w->f;
        int err = 0;

        if (w->magic != WCTX_MAGIC)
                atomic_fetch_add(&f->bad_ctx, 1);
        assert_int_equal(res->outcome, RECONCILE_DONE);
        pthread_mutex_lock(&f->mu);
        if (f->calls < f->n_script) {
                const struct step *s = &f->script[f->calls];

                err = s->err;
                res->outcome = s->outcome;
                res->after_ms = s->after_ms;
        }
        f->calls++;
        record(f, ns, name);
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->mu);
        return err;
}

static const struct controller_ops rec_ops = {
        .worker_new = w_new,
        .worker_free = w_free,
        .reconcile = rec_reconcile,
};

static struct fx *fx_new(unsigned workers, const struct controller_ops *ops)
{
        struct fx *f = calloc(1, sizeof(*f));
        pthread_condattr_t ca;

        assert_non_null(f);
        clock_fake_init(&f->clk, 1000, 1700000000);
        pthread_mutex_init(&f->mu, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&f->cond, &ca);
        pthread_condattr_destroy(&ca);
        assert_int_equal(metrics_new(&f->m), 0);
        assert_int_equal(controller_new(&(struct controller_opts){ .name = "test",
                                                                   .workers = workers,
                                                                   .ops = ops,
                                                                   .arg = f,
                                                                   .clock = &f->clk.ops,
                                                                   .metrics = f->m },
                                        &f->c),
                         0);
        return f;
}

static void fx_free(struct fx *f)
{
        f->c = controller_free(f->c);
        f->m = metrics_free(f->m);
        pthread_cond_destroy(&f->cond);
        pthread_mutex_destroy(&f->mu);
        free(f);
}

static unsigned calls_now(struct fx *f)
{
        unsigned n;

        pthread_mutex_lock(&f->mu);
        n = f->calls;
        pthread_mutex_unlock(&f->mu);
        return n;
}

static void wait_calls(struct fx *f, unsigned n)
{
        struct timespec ts;

        clock_deadline_ts(WAIT_MS, &ts);
        pthread_mutex_lock(&f->mu);
        while (f->calls < n)
                if (pthread_cond_timedwait(&f->cond, &f->mu, &ts) != 0)
                        break;
        assert_true(f->calls >= n);
        pthread_mutex_unlock(&f->mu);
}

static unsigned seen_count(struct fx *f, const char *key)
{
        unsigned n = 0;

        for (size_t i = 0; i < f->n_seen; i++)
                if (!strcmp(f->seen[i].key, key))
                        n = f->seen[i].count;
        return n;
}

/* Waits until key ("ns|name") was reconciled at least n times. */
static void wait_seen(struct fx *f, const char *key, unsigned n)
{
        struct timespec ts;

        clock_deadline_ts(WAIT_MS, &ts);
        pthread_mutex_lock(&f->mu);
        while (seen_count(f, key) < n)
                if (pthread_cond_timedwait(&f->cond, &f->mu, &ts) != 0)
                        break;
        assert_true(seen_count(f, key) >= n);
        pthread_mutex_unlock(&f->mu);
}

static void nap(void)
{
        struct timespec ts = { 0, 1000000 };

        nanosleep(&ts, NULL);
}

/* Waits (bounded) until no key is being processed or waiting, and `delayed` are parked. */
static void settle(struct fx *f, uint64_t delayed)
{
        struct workqueue_stats st;

        for (int i = 0; i < WAIT_MS; i++) {
                controller_queue_stats(f->c, &st);
                if (st.processing == 0 && st.depth == 0 && st.delayed == delayed)
                        return;
                nap();
        }
        fail_msg("queue did not settle: processing=%llu depth=%llu delayed=%llu",
                 (unsigned long long)st.processing, (unsigned long long)st.depth,
                 (unsigned long long)st.delayed);
}

/* The key must stay parked for delay_ms - 1 and come back at exactly delay_ms. */
static void expect_delay(struct fx *f, uint64_t delay_ms, unsigned calls_before)
{
        struct workqueue_stats st;

        settle(f, 1);
        clock_fake_advance(&f->clk, delay_ms - 1);
        controller_tick(f->c);
        controller_queue_stats(f->c, &st);
        assert_int_equal(st.depth, 0);
        assert_int_equal(st.delayed, 1);
        assert_int_equal(calls_now(f), calls_before);
        clock_fake_advance(&f->clk, 1);
        controller_tick(f->c);
        wait_calls(f, calls_before + 1);
}

static char *render(struct metrics *m)
{
        struct buf b;

        buf_init(&b, 1 << 20);
        assert_int_equal(metrics_render(m, &b), 0);
        return buf_take(&b, NULL);
}

static void expect_line(const char *text, const char *line)
{
        if (!strstr(text, line))
                fail_msg("missing \"%s\" in:\n%s", line, text);
}

/* ---- results ---- */

static void test_controller__results_requeue_as_controller_runtime(void **state)
{
        static const struct step script[] = {
                { .err = CM_ESERVER },                                    /* 5 ms */
                { .outcome = RECONCILE_REQUEUE },                         /* 10 ms */
                { .outcome = RECONCILE_REQUEUE_AFTER, .after_ms = 5000 }, /* forgets */
                { .outcome = RECONCILE_REQUEUE },                         /* 5 ms again */
                { .err = CM_ETRANSPORT,
                  .outcome = RECONCILE_REQUEUE_AFTER, /* error wins: */
                  .after_ms = 999999 },               /* 10 ms */
                { .outcome = RECONCILE_DONE },
        };
        struct fx *f = fx_new(1, &rec_ops);
        char *text;

        (void)state;
        f->script = script;
        f->n_script = ARRAY_SIZE(script);
        assert_int_equal(controller_start(f->c), 0);
        controller_enqueue(f->c, "ns", "a");
        wait_calls(f, 1);
        expect_delay(f, 5, 1);
        expect_delay(f, 10, 2);
        expect_delay(f, 5000, 3);
        expect_delay(f, 5, 4);
        expect_delay(f, 10, 5);
        settle(f, 0); /* DONE: nothing parked */
        clock_fake_advance(&f->clk, 3600000);
        controller_tick(f->c);
        settle(f, 0);
        assert_int_equal(calls_now(f), 6);

        text = render(f->m);
        expect_line(
                text,
                "controller_runtime_reconcile_total{controller=\"test\",result=\"success\"} 1\n");
        expect_line(text,
                    "controller_runtime_reconcile_total{controller=\"test\",result=\"error\"} 2\n");
        expect_line(
                text,
                "controller_runtime_reconcile_total{controller=\"test\",result=\"requeue\"} 2\n");
        expect_line(text, "controller_runtime_reconcile_total{controller=\"test\",result=\"requeue_"
                          "after\"} 1\n");
        expect_line(text, "controller_runtime_reconcile_errors_total{controller=\"test\"} 2\n");
        expect_line(text,
                    "controller_runtime_reconcile_time_seconds_count{controller=\"test\"} 6\n");
        expect_line(text, "controller_runtime_max_concurrent_reconciles{controller=\"test\"} 1\n");
        expect_line(text, "controller_runtime_active_workers{controller=\"test\"} 0\n");
        expect_line(text, "workqueue_depth{name=\"test\"} 0\n");
        expect_line(text, "workqueue_retries_total{name=\"test\"} 4\n");
        expect_line(text, "workqueue_adds_total{name=\"test\"} 6\n");
        expect_line(text, "workqueue_queue_duration_seconds_count{name=\"test\"} 6\n");
        expect_line(text, "workqueue_work_duration_seconds_count{name=\"test\"} 6\n");
        expect_line(text, "workqueue_unfinished_work_seconds{name=\"test\"} 0\n");
        expect_line(text, "workqueue_longest_running_processor_seconds{name=\"test\"} 0\n");
        expect_line(text, "# TYPE controller_runtime_reconcile_time_seconds histogram\n");
        expect_line(text, "# TYPE workqueue_queue_duration_seconds histogram\n");
        free(text);
        fx_free(f);
}

static void test_controller__requeue_after_zero_requeues_at_once(void **state)
{
        static const struct step script[] = {
                { .outcome = RECONCILE_REQUEUE_AFTER, .after_ms = 0 },
        };
        struct fx *f = fx_new(2, &rec_ops);

        (void)state;
        f->script = script;
        f->n_script = 1;
        assert_int_equal(controller_start(f->c), 0);
        controller_enqueue(f->c, "ns", "a");
        wait_calls(f, 2); /* without the clock moving */
        settle(f, 0);
        fx_free(f);
}

static void test_controller__metrics_outlive_the_controller(void **state)
{
        struct fx *f = fx_new(1, &rec_ops);
        struct metrics *m = f->m;
        char *text;

        (void)state;
        f->c = controller_free(f->c);
        text = render(m); /* the collector must not touch the freed queue */
        expect_line(text, "controller_runtime_max_concurrent_reconciles{controller=\"test\"} 1\n");
        free(text);
        fx_free(f);
}

static void test_controller__enqueue_after_waits_on_the_clock(void **state)
{
        struct fx *f = fx_new(1, &rec_ops);

        (void)state;
        assert_int_equal(controller_start(f->c), 0);
        controller_enqueue_after(f->c, "ns", "later", 3000);
        expect_delay(f, 3000, 0);
        wait_seen(f, "ns|later", 1);
        fx_free(f);
}

static void test_controller__cluster_scoped_key_and_stop(void **state)
{
        struct fx *f = fx_new(3, &rec_ops);
        struct workqueue_stats st;

        (void)state;
        assert_int_equal(controller_start(f->c), 0);
        assert_int_equal(controller_start(f->c), CM_EINVAL);
        controller_enqueue(f->c, NULL, "node-1");
        controller_enqueue(f->c, "", "node-2");
        wait_seen(f, "|node-1", 1);
        wait_seen(f, "|node-2", 1);
        controller_enqueue(f->c, "ns", ""); /* no name: dropped */
        controller_stop(f->c);
        controller_stop(f->c);               /* idempotent */
        controller_enqueue(f->c, "ns", "x"); /* after stop: dropped */
        controller_queue_stats(f->c, &st);
        assert_int_equal(st.depth, 0);
        assert_int_equal(atomic_load(&f->news), 3);
        assert_int_equal(atomic_load(&f->frees), 3);
        assert_int_equal(atomic_load(&f->idx_mask), 0x7);
        assert_int_equal(atomic_load(&f->bad_ctx), 0);
        fx_free(f);
}

static void test_controller__rejects_bad_options(void **state)
{
        struct controller *c = NULL;
        static const struct controller_ops no_reconcile = { 0 };

        (void)state;
        assert_int_equal(controller_new(&(struct controller_opts){ .name = "x" }, &c), CM_EINVAL);
        assert_int_equal(controller_new(&(struct controller_opts){ .ops = &rec_ops }, &c),
                         CM_EINVAL);
        assert_int_equal(
                controller_new(&(struct controller_opts){ .name = "x", .ops = &no_reconcile }, &c),
                CM_EINVAL);
        assert_null(c);
        assert_null(controller_free(NULL));
}

/* ---- one key, one worker (TSan) ---- */

static int excl_reconcile(void *wctx,
                          const char *ns,
                          const char *name,
                          struct reconcile_result *res)
{
        struct fx *f = ((struct wctx *)wctx)->f;
        unsigned idx = (unsigned)strtoul(name + 1, NULL, 10) % MAX_KEYS;

        (void)ns;
        (void)res;
        if (atomic_exchange(&f->inflight[idx], 1) != 0)
                atomic_fetch_add(&f->violations, 1);
        for (int i = 0; i < 20; i++)
                sched_yield();
        atomic_store(&f->inflight[idx], 0);
        atomic_fetch_add(&f->total, 1);
        pthread_mutex_lock(&f->mu);
        record(f, ns, name);
        pthread_mutex_unlock(&f->mu);
        return 0;
}

static const struct controller_ops excl_ops = {
        .worker_new = w_new,
        .worker_free = w_free,
        .reconcile = excl_reconcile,
};

struct producer {
        struct controller *c;
        unsigned seed;
};

static void *produce(void *arg)
{
        struct producer *p = arg;
        char name[16];

        for (unsigned i = 0; i < 3000; i++) {
                snprintf(name, sizeof(name), "k%u", (i * 7 + p->seed) % 32);
                controller_enqueue(p->c, "ns", name);
                if (i % 64 == 0)
                        sched_yield();
        }
        return NULL;
}

static void test_controller__key_never_reconciled_by_two_workers(void **state)
{
        struct fx *f = fx_new(8, &excl_ops);
        struct producer p[4];
        pthread_t th[4];
        char key[32];

        (void)state;
        assert_int_equal(controller_start(f->c), 0);
        for (unsigned i = 0; i < 4; i++) {
                p[i] = (struct producer){ .c = f->c, .seed = i };
                assert_int_equal(pthread_create(&th[i], NULL, produce, &p[i]), 0);
        }
        for (unsigned i = 0; i < 4; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        settle(f, 0);
        assert_int_equal(atomic_load(&f->violations), 0);
        for (unsigned i = 0; i < 32; i++) {
                snprintf(key, sizeof(key), "ns|k%u", i);
                pthread_mutex_lock(&f->mu);
                assert_true(seen_count(f, key) >= 1);
                pthread_mutex_unlock(&f->mu);
        }
        /* 12000 adds collapse: far fewer reconciles than events */
        assert_true(atomic_load(&f->total) >= 32);
        assert_true(atomic_load(&f->total) <= 12000);
        controller_stop(f->c);
        assert_int_equal(atomic_load(&f->news), 8);
        assert_int_equal(atomic_load(&f->frees), 8);
        assert_int_equal(atomic_load(&f->idx_mask), 0xff);
        fx_free(f);
}

/* ---- informer events to keys ---- */

static cJSON *mkobj(const char *ns, const char *name, const char *rv, const char *cluster)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");

        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "namespace", ns);
        cJSON_AddStringToObject(md, "resourceVersion", rv);
        if (cluster)
                cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "labels"),
                                        "cluster.x-k8s.io/cluster-name", cluster);
        return o;
}

/* Maps an object to the key of its cluster ("<ns>/<cluster>"), if labelled. */
static void map_cluster(void *map_arg,
                        const struct kube_object *o,
                        void (*add)(void *ctl, const char *ns, const char *name),
                        void *ctl)
{
        atomic_uint *calls = map_arg;

        atomic_fetch_add(calls, 1);
        if (kube_object_cluster_name(o))
                add(ctl, kube_object_namespace(o), kube_object_cluster_name(o));
}

static void test_controller__watch_maps_informer_events_to_keys(void **state)
{
        struct fx *f = fx_new(2, &rec_ops);
        struct informer *inf = NULL;
        atomic_uint map_calls;

        (void)state;
        atomic_init(&map_calls, 0);
        assert_int_equal(
                informer_new(&(struct informer_opts){ .resource = &KUBE_RES_MAASMACHINES }, &inf),
                0);
        assert_int_equal(controller_watch(f->c, inf, NULL, NULL), 0);
        assert_int_equal(controller_watch(f->c, inf, map_cluster, &map_calls), 0);
        assert_int_equal(controller_start(f->c), 0);
        assert_int_equal(controller_watch(f->c, inf, NULL, NULL), CM_EINVAL);

        assert_int_equal(informer_feed_event(inf, KUBE_WATCH_ADDED, mkobj("ns1", "m", "1", "c1")),
                         0);
        wait_seen(f, "ns1|m", 1);
        wait_seen(f, "ns1|c1", 1);
        assert_int_equal(atomic_load(&map_calls), 1);
        settle(f, 0);
        /* relabel: the own key, and both the old and the new cluster */
        assert_int_equal(
                informer_feed_event(inf, KUBE_WATCH_MODIFIED, mkobj("ns1", "m", "2", "c2")), 0);
        wait_seen(f, "ns1|m", 2);
        wait_seen(f, "ns1|c1", 2);
        wait_seen(f, "ns1|c2", 1);
        assert_int_equal(atomic_load(&map_calls), 3);
        settle(f, 0);
        assert_int_equal(informer_feed_event(inf, KUBE_WATCH_DELETED, mkobj("ns1", "m", "3", "c2")),
                         0);
        wait_seen(f, "ns1|m", 3);
        wait_seen(f, "ns1|c2", 2);
        assert_int_equal(atomic_load(&map_calls), 4);
        settle(f, 0);
        inf = informer_free(inf); /* informers go first: their handlers point at f->c */
        fx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_controller__results_requeue_as_controller_runtime),
                cmocka_unit_test(test_controller__requeue_after_zero_requeues_at_once),
                cmocka_unit_test(test_controller__metrics_outlive_the_controller),
                cmocka_unit_test(test_controller__enqueue_after_waits_on_the_clock),
                cmocka_unit_test(test_controller__cluster_scoped_key_and_stop),
                cmocka_unit_test(test_controller__rejects_bad_options),
                cmocka_unit_test(test_controller__key_never_reconciled_by_two_workers),
                cmocka_unit_test(test_controller__watch_maps_informer_events_to_keys),
        };

        return cmocka_run_group_tests_name("controller", tests, NULL, NULL);
}
