#pragma once
/*
 * metrics_endpoint: GET /metrics, the Prometheus text exposition of a metrics registry
 * (http/metrics_endpoint.c). Add it to a router before the router is frozen; the handler
 * then runs on the listener's threads and renders the registry under its own lock.
 */

#include "compiler.h"

struct metrics;
struct router;

/* Routes GET /metrics on r to a rendering of m (borrowed: m must outlive r's listener). A
 * body past 16 MiB is answered with 500. */
MUST_CHECK int metrics_endpoint_add(struct router *r, struct metrics *m);
