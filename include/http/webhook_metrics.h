#pragma once
/*
 * webhook_metrics: the controller-runtime webhook and certwatcher series served by the
 * HTTPS server (kubernetes.md §5.3), registered by webhook_metrics_register()
 * (http/webhook_metrics.c). Families are owned by the registry; the caller keeps this struct for
 * fast access.
 */

#include "compiler.h"

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
