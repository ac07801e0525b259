/*
 * webhook_metrics: registers the webhook and certwatcher series that controller-runtime's
 * webhook server exports (kubernetes.md §5.3), with its names, labels and help texts, so
 * dashboards written for controller-runtime providers work unchanged, and the serving
 * certificate's expiry (beyond.md B9) for an alert before it runs out. The families belong
 * to the registry; struct webhook_metrics only caches pointers to them.
 */
#include "webhook_metrics.h"

#include <stddef.h>
#include <stdio.h>

#include "certstore.h"
#include "err.h"
#include "metrics.h"

static const char *const webhook_code_labels[] = { "webhook", "code", NULL };
static const char *const webhook_labels[] = { "webhook", NULL };

static int register_series(struct metrics *m,
                           const char *name,
                           const char *help,
                           struct metric_series **ret)
{
        struct metric_family *f = NULL;
        int r;

        r = metrics_counter(m, name, help, NULL, &f);
        if (r == 0)
                *ret = metric_series(f, NULL);
        return r;
}

static int register_families(struct metrics *m, struct webhook_metrics *w)
{
        const struct metric_desc latency = {
                .type = METRIC_HISTOGRAM,
                .name = "controller_runtime_webhook_latency_seconds",
                .help = "Histogram of the latency of processing admission requests",
                .labels = webhook_labels,
                .buckets = metrics_default_buckets,
                .n_buckets = METRICS_DEFAULT_BUCKETS_N,
        };
        int r;

        r = metrics_counter(m, "controller_runtime_webhook_requests_total",
                            "Total number of admission requests by HTTP status code.",
                            webhook_code_labels, &w->requests);
        if (r == 0)
                r = metrics_register(m, &latency, &w->latency);
        if (r == 0)
                r = metrics_gauge(m, "controller_runtime_webhook_requests_in_flight",
                                  "Current number of admission requests being served.",
                                  webhook_labels, &w->in_flight);
        return r;
}

int webhook_metrics_register(struct metrics *m, struct webhook_metrics *ret)
{
        struct webhook_metrics w = { 0 };
        struct metric_family *f = NULL;
        int r;

        r = register_families(m, &w);
        if (r == 0)
                r = register_series(m, "controller_runtime_webhook_panics_total",
                                    "Total number of webhook panics", &w.panics);
        if (r == 0)
                r = register_series(m, "certwatcher_read_certificate_total",
                                    "Total number of certificate reads", &w.cert_reads);
        if (r == 0)
                r = register_series(m, "certwatcher_read_certificate_errors_total",
                                    "Total number of certificate read errors", &w.cert_read_errors);
        if (r == 0)
                r = metrics_gauge(m, "capmaas_webhook_certificate_expiry_timestamp_seconds",
                                  "Expiry (notAfter, Unix seconds) of the serving certificate in "
                                  "use; 0 when none is loaded.",
                                  NULL, &f);
        if (r == 0) {
                w.cert_expiry = metric_series(f, NULL);
                *ret = w;
        }
        return r;
}

static const struct webhook_path_series *find_path_series(const struct webhook_instruments *wi,
                                                          const char *path)
{
        for (size_t i = 0; i < wi->n_paths; i++)
                if (wi->paths[i].path == path)
                        return &wi->paths[i];
        return NULL;
}

static void observe_begin(void *ud, const char *path)
{
        struct webhook_instruments *wi = ud;
        const struct webhook_path_series *ps = find_path_series(wi, path);

        metric_gauge_inc(ps ? ps->in_flight : metric_series(wi->wm.in_flight, path, NULL));
}

static void observe_end(void *ud, const char *path, unsigned status, double seconds)
{
        struct webhook_instruments *wi = ud;
        const struct webhook_path_series *ps = find_path_series(wi, path);
        char code[8];

        if (ps && status == 200) {
                metric_counter_inc(ps->ok);
        } else {
                (void)snprintf(code, sizeof(code), "%u", status);
                metric_counter_inc(metric_series(wi->wm.requests, path, code, NULL));
        }
        metric_gauge_dec(ps ? ps->in_flight : metric_series(wi->wm.in_flight, path, NULL));
        metric_histogram_observe(ps ? ps->latency : metric_series(wi->wm.latency, path, NULL),
                                 seconds);
}

static void collect_cert_stats(struct metrics *m, void *ud)
{
        struct webhook_instruments *wi = ud;
        struct certstore_stats st;

        (void)m;
        certstore_stats(wi->certs, &st);
        metric_counter_set(wi->wm.cert_reads, (double)st.reads);
        metric_counter_set(wi->wm.cert_read_errors, (double)st.read_errors);
        metric_gauge_set(wi->wm.cert_expiry, st.loaded ? (double)st.not_after : 0);
}

int webhook_instruments_register(struct webhook_instruments *wi, struct metrics *m)
{
        int r;

        r = webhook_metrics_register(m, &wi->wm);
        if (r == 0)
                r = metrics_add_collector(m, collect_cert_stats, wi, NULL);
        wi->observer =
                (struct http_observer){ .begin = observe_begin, .end = observe_end, .ud = wi };
        return r;
}

void webhook_instruments_add_path(struct webhook_instruments *wi, const char *path)
{
        if (wi->n_paths == WEBHOOK_PATHS_MAX)
                return;
        wi->paths[wi->n_paths++] = (struct webhook_path_series){
                .path = path,
                .in_flight = metric_series(wi->wm.in_flight, path, NULL),
                .latency = metric_series(wi->wm.latency, path, NULL),
                .ok = metric_series(wi->wm.requests, path, "200", NULL),
        };
}
