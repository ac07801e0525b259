#pragma once
/*
 * serving: what every replica serves, leader or not (server/serving.c) — the admission
 * webhooks over HTTPS, /healthz and /readyz and /metrics over plain HTTP — and what those
 * listeners need: the metrics registry, the serving certificate (reloaded in the
 * background), the routes, the health checks and the webhooks.
 *
 * Ownership: struct serving owns all of the above; the MAAS inventory and the per-cluster
 * inventories given to serving_start() are borrowed and must outlive serving_stop().
 * Threads: main's thread calls serving_new, serving_start, serving_stop and serving_free,
 * in that order; the listeners answer on their own threads in between. The registry may be
 * used from any thread (metrics.h).
 */

#include "compiler.h"

struct config;
struct maas_inventory;
struct maas_inventories;
struct metrics;
struct serving;

/* Creates the metrics registry (with the process and webhook series) and loads the serving
 * certificate. *ret is set even on failure: serving_free() it. *reterr (malloc'd) says why. */
MUST_CHECK int serving_new(const struct config *cfg, struct serving **ret, char **reterr);
/* The registry (borrowed; lives until serving_free). */
struct metrics *serving_metrics(const struct serving *s);
/* Starts the webhook, health and metrics listeners, with the admission MAAS checks on inv
 * (NULL: off) and, for objects of a cluster with spec.identityRef, on inventories (NULL:
 * every object against inv), and logs where they listen. */
MUST_CHECK int serving_start(struct serving *s,
                             struct maas_inventory *inv,
                             struct maas_inventories *inventories,
                             char **reterr);
/* Stops accepting webhook requests, lets those in flight finish within
 * --graceful-shutdown-timeout, then closes the listeners and frees the webhooks (so inv may
 * go after this). */
void serving_stop(struct serving *s);
/* Frees the certificate store, the routes, the health checks and the registry (after
 * serving_stop). Accepts NULL; returns NULL. */
struct serving *serving_free(struct serving *s);
