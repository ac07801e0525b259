/*
 * http_metrics: registers the webhook and certwatcher series that controller-runtime's
 * webhook server exports (kubernetes.md §5.3), with its names, labels and help texts, so
 * dashboards written for controller-runtime providers work unchanged, and the serving
 * certificate's expiry (beyond.md B9) for an alert before it runs out. The families belong
 * to the registry; struct webhook_metrics only caches pointers to them.
 */
#include "webhook_metrics.h"

#include <stddef.h>

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
