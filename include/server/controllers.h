#pragma once
/*
 * controllers: the provider's control loop (server/controllers.c): the Kubernetes client
 * configuration, the API rate limiter, the provider (informers, MaasCluster and MaasMachine
 * reconcilers) and, with --leader-elect, the leader election that starts it. The provider
 * runs on the leader only; without --leader-elect this process leads at once. Leadership
 * lost (another replica holds the Lease) sends the process SIGTERM, and controllers_lost()
 * then says so: the process exits with status 1, as controller-runtime does, so Kubernetes
 * restarts it as a clean candidate.
 *
 * Ownership: struct controllers owns everything above; the metrics registry is borrowed.
 * Threads: main's thread calls controllers_start and controllers_free; the leader election
 * thread starts the provider.
 */

#include <stdbool.h>

#include "compiler.h"

struct config;
struct controllers;
struct maas_inventory;
struct metrics;
struct provider_inventory_source;
struct token_bucket;

/* Starts the controllers (campaigning first with --leader-elect). With --webhooks-only
 * *ret is NULL and nothing starts; without MAAS configured it fails. *ret is set even on
 * failure: controllers_free() it. *reterr (malloc'd) says why. maas_budget (borrowed,
 * may be NULL) paces every worker's MAAS calls and inventory (borrowed, may be NULL) is the
 * MAAS inventory cache the provider reads, ident_inventories (borrowed, may be NULL) those
 * of the per-cluster MAAS (spec.identityRef); all must outlive the controllers. */
MUST_CHECK int controllers_start(const struct config *cfg,
                                 struct metrics *m,
                                 struct token_bucket *maas_budget,
                                 struct maas_inventory *inventory,
                                 const struct provider_inventory_source *ident_inventories,
                                 struct controllers **ret,
                                 char **reterr);
/* Whether leadership was lost (read after SIGTERM arrived). false for NULL. */
bool controllers_lost(const struct controllers *c);
/* Stops reconciling, then hands the Lease over, and frees. Accepts NULL; returns NULL. */
struct controllers *controllers_free(struct controllers *c);
