/*
 * controller: controller-runtime's reconcile loop over a workqueue (controller.h).
 *
 * Design: informer handlers turn events into "namespace/name" keys (just "name" for
 * cluster-scoped objects) and add them to the queue; N worker threads loop on
 * workqueue_get(), call the reconcile function and re-queue as its result says. The queue
 * guarantees that one key is never processed by two workers at once and that N events
 * arriving during a reconcile collapse into one more reconcile.
 *
 * Metrics: series are looked up once in controller_new() and then updated lock-free. The
 * workqueue_* figures live in the queue; a collector copies them at scrape time. The
 * collector's state is owned by the registry (metrics_free frees it), so it holds the queue
 * through a pointer the controller clears, under the collector's mutex, when it is freed.
 * Queue waits are only known to the queue as sums, so each scrape observes the average wait
 * of the keys handed out since the previous scrape (count and sum are exact).
 */
#include "controller.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "informer.h"
#include "log.h"
#include "metrics.h"
#include "workqueue.h"
#include "xalloc.h"

#define MAX_WATCHES 16

enum result_kind {
        RES_SUCCESS,
        RES_ERROR,
        RES_REQUEUE,
        RES_REQUEUE_AFTER,
        RES_COUNT,
};

static const char *const result_names[RES_COUNT] = {
        [RES_SUCCESS] = "success",
        [RES_ERROR] = "error",
        [RES_REQUEUE] = "requeue",
        [RES_REQUEUE_AFTER] = "requeue_after",
};

enum fam {
        F_TOTAL,
        F_ERRORS,
        F_TIME,
        F_MAX_CONCURRENT,
        F_ACTIVE,
        F_WQ_DEPTH,
        F_WQ_ADDS,
        F_WQ_RETRIES,
        F_WQ_QUEUE_DURATION,
        F_WQ_WORK_DURATION,
        F_WQ_UNFINISHED,
        F_WQ_LONGEST,
        F_COUNT,
};

/* client-go's workqueue buckets: 10 ns × 10^i, i = 0..11 */
static const double wq_buckets[] = { 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3,
                                     1e-2, 1e-1, 1,    10,   100,  1000 };

static const char *const ctl_labels[] = { "controller", NULL };
static const char *const total_labels[] = { "controller", "result", NULL };
static const char *const wq_labels[] = { "name", NULL };

static const struct metric_desc fam_descs[F_COUNT] = {
        [F_TOTAL] = { METRIC_COUNTER, "controller_runtime_reconcile_total",
                      "Reconciliations per controller and result.", total_labels, NULL, 0, 0 },
        [F_ERRORS] = { METRIC_COUNTER, "controller_runtime_reconcile_errors_total",
                       "Reconciliations that returned an error, per controller.", ctl_labels, NULL,
                       0, 0 },
        [F_TIME] = { METRIC_HISTOGRAM, "controller_runtime_reconcile_time_seconds",
                     "Time spent in each reconciliation, per controller.", ctl_labels,
                     metrics_reconcile_buckets, METRICS_RECONCILE_BUCKETS_N, 0 },
        [F_MAX_CONCURRENT] = { METRIC_GAUGE, "controller_runtime_max_concurrent_reconciles",
                               "Worker threads of each controller.", ctl_labels, NULL, 0, 0 },
        [F_ACTIVE] = { METRIC_GAUGE, "controller_runtime_active_workers",
                       "Workers reconciling right now, per controller.", ctl_labels, NULL, 0, 0 },
        [F_WQ_DEPTH] = { METRIC_GAUGE, "workqueue_depth", "Keys waiting for a worker.", wq_labels,
                         NULL, 0, 0 },
        [F_WQ_ADDS] = { METRIC_COUNTER, "workqueue_adds_total",
                        "Keys added to the queue (not counting duplicates).", wq_labels, NULL, 0,
                        0 },
        [F_WQ_RETRIES] = { METRIC_COUNTER, "workqueue_retries_total", "Rate-limited re-adds.",
                           wq_labels, NULL, 0, 0 },
        [F_WQ_QUEUE_DURATION] = { METRIC_HISTOGRAM, "workqueue_queue_duration_seconds",
                                  "Seconds a key waited in the queue before a worker took it.",
                                  wq_labels, wq_buckets, ARRAY_SIZE(wq_buckets), 0 },
        [F_WQ_WORK_DURATION] = { METRIC_HISTOGRAM, "workqueue_work_duration_seconds",
                                 "Seconds a worker spent on a key.", wq_labels, wq_buckets,
                                 ARRAY_SIZE(wq_buckets), 0 },
        [F_WQ_UNFINISHED] = { METRIC_GAUGE, "workqueue_unfinished_work_seconds",
                              "Seconds of work in progress not yet counted in "
                              "work_duration; a steady rise means stuck workers.",
                              wq_labels, NULL, 0, 0 },
        [F_WQ_LONGEST] = { METRIC_GAUGE, "workqueue_longest_running_processor_seconds",
                           "Seconds the longest-running worker has spent on its key.", wq_labels,
                           NULL, 0, 0 },
};

/* Owned by the metrics registry (ud_free). */
struct ctl_collector {
        pthread_mutex_t mu;
        struct workqueue *q; /* borrowed; NULL once the controller is gone */
        struct metric_series *depth, *adds, *retries, *queue_duration, *unfinished, *longest;
        uint64_t seen_count; /* queue_count / queue_ms_sum at the previous scrape */
        uint64_t seen_ms;
};

struct ctl_series {
        struct metric_series *total[RES_COUNT];
        struct metric_series *errors;
        struct metric_series *time;
        struct metric_series *active;
        struct metric_series *work_duration;
};

struct ctl_watch {
        struct controller *c; /* borrowed (the owner) */
        controller_map_fn map;
        void *map_arg;
};

struct ctl_worker {
        struct controller *c; /* borrowed (the owner) */
        unsigned idx;
        pthread_t thread;
};

struct controller {
        char *name; /* owned */
        unsigned workers;
        const struct controller_ops *ops; /* borrowed */
        void *arg;                        /* borrowed */
        const struct clock_ops *clock;    /* borrowed */
        struct workqueue *q;              /* owned */
        struct ctl_worker *w;             /* owned array of `workers` */
        unsigned n_running;               /* threads created */
        struct ctl_watch watches[MAX_WATCHES];
        size_t n_watches;
        struct ctl_series m;        /* all NULL without metrics */
        struct ctl_collector *coll; /* borrowed from the registry; NULL without metrics */
        bool started;
        bool stopped;
};

/* ---- metrics ---- */

static void series_inc(struct metric_series *s)
{
        if (s)
                metric_counter_inc(s);
}

static void series_gauge_add(struct metric_series *s, double v)
{
        if (s)
                metric_gauge_add(s, v);
}

static void series_observe(struct metric_series *s, double v)
{
        if (s)
                metric_histogram_observe(s, v);
}

static void collect(struct metrics *m, void *ud)
{
        struct ctl_collector *k = ud;
        struct workqueue_stats st;
        uint64_t dc;

        (void)m;
        (void)pthread_mutex_lock(&k->mu);
        if (!k->q)
                goto out_unlock;
        workqueue_stats(k->q, &st);
        metric_gauge_set(k->depth, (double)st.depth);
        metric_counter_set(k->adds, (double)st.adds_total);
        metric_counter_set(k->retries, (double)st.retries_total);
        metric_gauge_set(k->unfinished, (double)st.unfinished_ms / 1000.0);
        metric_gauge_set(k->longest, (double)st.longest_ms / 1000.0);
        dc = st.queue_count - k->seen_count;
        for (uint64_t i = 0; i < dc; i++)
                metric_histogram_observe(k->queue_duration, (double)(st.queue_ms_sum - k->seen_ms) /
                                                                    (double)dc / 1000.0);
        k->seen_count = st.queue_count;
        k->seen_ms = st.queue_ms_sum;
out_unlock:
        (void)pthread_mutex_unlock(&k->mu);
}

static void collector_free(void *ud)
{
        struct ctl_collector *k = ud;

        (void)pthread_mutex_destroy(&k->mu);
        free(k);
}

static int register_all(struct metrics *m, struct metric_family *f[F_COUNT])
{
        int r;

        for (size_t i = 0; i < F_COUNT; i++) {
                r = metrics_register(m, &fam_descs[i], &f[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int metrics_setup(struct controller *c, struct metrics *m)
{
        struct metric_family *f[F_COUNT];
        struct ctl_collector *k;
        const char *n = c->name;
        int r;

        r = register_all(m, f);
        if (r < 0)
                return r;
        for (size_t i = 0; i < RES_COUNT; i++)
                c->m.total[i] = metric_series(f[F_TOTAL], n, result_names[i]);
        c->m.errors = metric_series(f[F_ERRORS], n);
        c->m.time = metric_series(f[F_TIME], n);
        c->m.active = metric_series(f[F_ACTIVE], n);
        c->m.work_duration = metric_series(f[F_WQ_WORK_DURATION], n);
        metric_gauge_set(metric_series(f[F_MAX_CONCURRENT], n), (double)c->workers);
        k = xcalloc(1, sizeof(*k));
        (void)pthread_mutex_init(&k->mu, NULL);
        k->q = c->q;
        k->depth = metric_series(f[F_WQ_DEPTH], n);
        k->adds = metric_series(f[F_WQ_ADDS], n);
        k->retries = metric_series(f[F_WQ_RETRIES], n);
        k->queue_duration = metric_series(f[F_WQ_QUEUE_DURATION], n);
        k->unfinished = metric_series(f[F_WQ_UNFINISHED], n);
        k->longest = metric_series(f[F_WQ_LONGEST], n);
        r = metrics_add_collector(m, collect, k, collector_free);
        if (r < 0) {
                collector_free(k);
                return r;
        }
        c->coll = k;
        return 0;
}

/* ---- keys ---- */

/* "ns/name", or "name" when ns is empty; false when it does not fit. */
static bool key_format(const char *ns, const char *name, char out[WORKQUEUE_MAX_KEY + 1])
{
        bool has_ns = ns && *ns;
        int n = snprintf(out, WORKQUEUE_MAX_KEY + 1, "%s%s%s", has_ns ? ns : "", has_ns ? "/" : "",
                         name);

        return n > 0 && n <= WORKQUEUE_MAX_KEY;
}

/* Splits a key in place into ns ("" when cluster-scoped) and name. */
static void key_split(char *key, const char **ret_ns, const char **ret_name)
{
        char *slash = strchr(key, '/');

        if (!slash) {
                *ret_ns = "";
                *ret_name = key;
                return;
        }
        *slash = '\0';
        *ret_ns = key;
        *ret_name = slash + 1;
}

static void enqueue_after(struct controller *c, const char *ns, const char *name, uint64_t ms)
{
        char key[WORKQUEUE_MAX_KEY + 1];

        if (!name || !*name || !key_format(ns, name, key)) {
                log_warn("controller", "key dropped", "controller=%s name=%s", c->name,
                         name ? name : "");
                return;
        }
        if (workqueue_add_after(c->q, key, ms) < 0)
                return; /* CM_ESHUTDOWN after stop: dropped, as documented */
}

void controller_enqueue(struct controller *c, const char *ns, const char *name)
{
        enqueue_after(c, ns, name, 0);
}

void controller_enqueue_after(struct controller *c,
                              const char *ns,
                              const char *name,
                              uint64_t delay_ms)
{
        enqueue_after(c, ns, name, delay_ms);
}

/* ---- informer events ---- */

static void map_add(void *ctl, const char *ns, const char *name)
{
        controller_enqueue(ctl, ns, name);
}

static void watch_obj(struct ctl_watch *w, const struct kube_object *o)
{
        if (w->map)
                w->map(w->map_arg, o, map_add, w->c);
        else
                controller_enqueue(w->c, kube_object_namespace(o), kube_object_name(o));
}

static void on_add(void *arg, const struct kube_object *o)
{
        watch_obj(arg, o);
}

static void on_update(void *arg, const struct kube_object *old, const struct kube_object *cur)
{
        struct ctl_watch *w = arg;

        /* the queue de-duplicates, so the own key added twice costs nothing */
        if (w->map && old != cur)
                watch_obj(w, old);
        watch_obj(w, cur);
}

static void on_delete(void *arg, const struct kube_object *last)
{
        watch_obj(arg, last);
}

int controller_watch(struct controller *c,
                     struct informer *inf,
                     controller_map_fn map,
                     void *map_arg)
{
        struct ctl_watch *w;
        int r;

        if (c->started || !inf)
                return CM_EINVAL;
        if (c->n_watches == MAX_WATCHES)
                return CM_ETOOBIG;
        w = &c->watches[c->n_watches];
        *w = (struct ctl_watch){ .c = c, .map = map, .map_arg = map_arg };
        r = informer_add_handler(inf, &(struct informer_handler){ .on_add = on_add,
                                                                  .on_update = on_update,
                                                                  .on_delete = on_delete,
                                                                  .arg = w });
        if (r < 0)
                return r;
        c->n_watches++;
        return 0;
}

/* ---- workers ---- */

static double mono_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Acts on a reconcile's outcome as controller-runtime's reconcileHandler does. */
/* Re-adds key; after shutdown the queue refuses, and the key is dropped (as in client-go). */
static void readd(struct controller *c, const char *key, bool rate_limited, uint64_t after_ms)
{
        int r = rate_limited ? workqueue_add_rate_limited(c->q, key)
                             : workqueue_add_after(c->q, key, after_ms);

        if (r < 0 && r != CM_ESHUTDOWN)
                log_warn("controller", "requeue failed", "controller=%s key=%s err=%s", c->name,
                         key, cm_strerror(r));
}

static enum result_kind requeue(struct controller *c,
                                const char *key,
                                int err,
                                const struct reconcile_result *res)
{
        if (err < 0) {
                readd(c, key, true, 0);
                return RES_ERROR;
        }
        switch (res->outcome) {
        case RECONCILE_REQUEUE_AFTER:
                workqueue_forget(c->q, key);
                readd(c, key, false, res->after_ms);
                return RES_REQUEUE_AFTER;
        case RECONCILE_REQUEUE:
                readd(c, key, true, 0);
                return RES_REQUEUE;
        case RECONCILE_DONE:
        default:
                workqueue_forget(c->q, key);
                return RES_SUCCESS;
        }
}

static void process(struct controller *c, void *wctx, const char *key)
{
        struct reconcile_result res = { .outcome = RECONCILE_DONE };
        char buf[WORKQUEUE_MAX_KEY + 1];
        const char *ns, *name;
        enum result_kind kind;
        double t0;
        int err;

        memcpy(buf, key, strnlen(key, WORKQUEUE_MAX_KEY) + 1);
        buf[WORKQUEUE_MAX_KEY] = '\0';
        key_split(buf, &ns, &name);
        series_gauge_add(c->m.active, 1);
        t0 = mono_s();
        err = c->ops->reconcile(wctx, ns, name, &res);
        series_observe(c->m.time, mono_s() - t0);
        series_gauge_add(c->m.active, -1);
        kind = requeue(c, key, err, &res);
        series_inc(c->m.total[kind]);
        if (kind == RES_ERROR) {
                series_inc(c->m.errors);
                log_error("controller", "Reconciler error", "controller=%s key=%s err=%s", c->name,
                          key, cm_strerror(err));
        }
        series_observe(c->m.work_duration, mono_s() - t0);
}

static void *worker_main(void *arg)
{
        struct ctl_worker *w = arg;
        struct controller *c = w->c;
        void *wctx = c->ops->worker_new ? c->ops->worker_new(c->arg, w->idx) : NULL;
        char *key;

        while (workqueue_get(c->q, &key) == 0) {
                process(c, wctx, key);
                workqueue_done(c->q, key);
                free(key);
        }
        if (c->ops->worker_free)
                c->ops->worker_free(wctx);
        return NULL;
}

/* ---- lifecycle ---- */

int controller_new(const struct controller_opts *o, struct controller **ret)
{
        struct controller *c;
        int r;

        if (!o || !o->name || !*o->name || !o->ops || !o->ops->reconcile)
                return CM_EINVAL;
        c = xcalloc(1, sizeof(*c));
        c->name = xstrdup(o->name);
        c->workers = o->workers ? o->workers : 1;
        c->ops = o->ops;
        c->arg = o->arg;
        c->clock = o->clock;
        r = workqueue_new(&(struct workqueue_opts){ .clock = o->clock }, &c->q);
        if (r < 0)
                goto out;
        if (o->metrics) {
                r = metrics_setup(c, o->metrics);
                if (r < 0)
                        goto out;
        }
        *ret = c;
        c = NULL;
out:
        controller_free(c);
        return r;
}

int controller_start(struct controller *c)
{
        if (c->started || c->stopped)
                return CM_EINVAL;
        c->started = true;
        c->w = xcalloc(c->workers, sizeof(*c->w));
        for (unsigned i = 0; i < c->workers; i++) {
                c->w[i] = (struct ctl_worker){ .c = c, .idx = i };
                if (pthread_create(&c->w[i].thread, NULL, worker_main, &c->w[i]) != 0) {
                        controller_stop(c);
                        return CM_EIO;
                }
                c->n_running++;
        }
        return 0;
}

void controller_stop(struct controller *c)
{
        if (c->stopped)
                return;
        c->stopped = true;
        workqueue_shutdown(c->q);
        for (unsigned i = 0; i < c->n_running; i++)
                (void)pthread_join(c->w[i].thread, NULL);
        c->n_running = 0;
}

struct controller *controller_free(struct controller *c)
{
        if (!c)
                return NULL;
        if (c->q)
                controller_stop(c);
        if (c->coll) {
                (void)pthread_mutex_lock(&c->coll->mu);
                c->coll->q = NULL;
                (void)pthread_mutex_unlock(&c->coll->mu);
        }
        c->q = workqueue_free(c->q);
        free(c->w);
        free(c->name);
        free(c);
        return NULL;
}

void controller_queue_stats(struct controller *c, struct workqueue_stats *ret)
{
        workqueue_stats(c->q, ret);
}

void controller_tick(struct controller *c)
{
        workqueue_tick(c->q);
}
