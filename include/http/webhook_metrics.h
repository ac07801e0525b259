#pragma once
/*
 * webhook_metrics: the controller-runtime webhook and certwatcher series served by the
 * HTTPS server (kubernetes.md §5.3), registered by webhook_metrics_register()
 * (http/webhook_metrics.c). Families are owned by the registry; the caller keeps this struct for
 * fast access.
 *
 * struct webhook_instruments puts them to work: the HTTPS server's observer (in flight,
 * latency and status of every request) and the registry's collector of the serving
 * certificate's reads and expiry.
 */

#include <stddef.h>

#include "compiler.h"
#include "http_server.h" /* struct http_observer */

#define WEBHOOK_PATHS_MAX 16

struct certstore;
struct metrics;
struct metric_family;
struct metric_series;

struct webhook_metrics {
        struct metric_family *requests;         /* requests_total{webhook,code} counter */
        struct metric_family *latency;          /* latency_seconds{webhook} histogram */
        struct metric_family *in_flight;        /* requests_in_flight{webhook} gauge */
        struct metric_series *panics;           /* webhook_panics_total counter */
        struct metric_series *cert_reads;       /* certwatcher_read_certificate_total */
        struct metric_series *cert_read_errors; /* certwatcher_read_certificate_errors_total */
        struct metric_series
                *cert_expiry; /* capmaas_webhook_certificate_expiry_timestamp_seconds */
};

/* Registers the families above (idempotent) and fills *ret. Thread-safe. */
MUST_CHECK int webhook_metrics_register(struct metrics *m, struct webhook_metrics *ret);

/* The series of one webhook path, looked up once at start so a request updates its metrics
 * without taking the registry lock. */
struct webhook_path_series {
        const char *path; /* the route's own pointer, compared by address */
        struct metric_series *in_flight;
        struct metric_series *latency;
        struct metric_series *ok; /* requests_total{code="200"} */
};

/*
 * Owned by the process (embedded; nothing to free: the families belong to the registry).
 * Filled on one thread before the webhook server starts: webhook_instruments_register(),
 * then webhook_instruments_add_path() per route, then certs once the pair is loaded. From
 * then on it is read only: the observer runs on the server's threads, the collector on
 * whichever thread renders the registry.
 */
struct webhook_instruments {
        struct webhook_metrics wm;
        struct certstore *certs; /* borrowed; what the collector reports */
        struct webhook_path_series paths[WEBHOOK_PATHS_MAX];
        size_t n_paths;
        struct http_observer observer; /* give &observer to the webhook server */
};

/* Registers the webhook series and a collector of certs' stats with m, and sets up the
 * observer. wi must stay where it is while m lives. */
MUST_CHECK int webhook_instruments_register(struct webhook_instruments *wi, struct metrics *m);
/* Caches path's series (path is the route's pointer, kept); past WEBHOOK_PATHS_MAX paths are
 * looked up per request instead. */
void webhook_instruments_add_path(struct webhook_instruments *wi, const char *path);
