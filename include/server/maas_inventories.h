#pragma once
/*
 * maas_inventories: the admission side of per-cluster MAAS credentials (docs/credentials.md):
 * one inventory cache per MAAS a MaasCluster's spec.identityRef names, so a template labelled
 * with a cluster (cluster.x-k8s.io/cluster-name) is checked against that cluster's MAAS.
 *
 * The controllers read the same cache (maas_inventories_provider_source): a template of
 * such a cluster gets its capacity, its MaasCluster its discovered failure domains, from
 * it, and each refresh of an identity's inventory is told to their listener.
 *
 * A lookup finds the cluster's MaasCluster (LIST maasclusters in the namespace by the
 * cluster-name label) and its Secret (GET by name), both remembered for 10 s; an identity's
 * inventory is built once per Secret resourceVersion and kept while it is used. At most
 * cfg->maas_identity_cache_max of them exist (--maas-identity-cache-max; 0 = the default,
 * MAAS_INVENTORIES_DEFAULT_MAX): the least recently used one goes first, and one unused for
 * MAAS_INVENTORIES_IDLE_MS is dropped at the next lookup. A Secret missing or malformed is
 * remembered for 5 s (the negative cache: one read per 5 s however many lookups ask). The
 * keys are registered with the log redaction; no message here holds one.
 *
 * Ownership: the caller owns the struct (maas_inventories_free, after the webhook server has
 * stopped); inventories handed out are referenced until released. Threads: acquire and
 * release from any server thread at once; the Kubernetes reads are made one at a time (one
 * client, behind a lock of their own), the cache under another.
 */

#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

struct clock_ops;
struct config;
struct provider_inventory_source;
struct maas_inventory;
struct maas_inventories;
struct webhooks_inventory_source;

#define MAAS_INVENTORIES_DEFAULT_MAX 8
#define MAAS_INVENTORIES_IDLE_MS     (10u * 60u * 1000u)

/* The per-cluster inventories for the webhooks, reading Kubernetes through cfg's kubeconfig
 * (or the in-cluster configuration), loaded on first use (the API server may start after
 * the webhooks) and again at most every 10 s while it fails: a labelled object is then
 * admitted with the "MAAS checks skipped" warning saying why. cfg is borrowed. */
MUST_CHECK int maas_inventories_new(const struct config *cfg,
                                    struct maas_inventories **ret,
                                    char **reterr);
/* The same with the clock the idle and recheck times are read on (NULL = system; tests). */
MUST_CHECK int maas_inventories_new_clock(const struct config *cfg,
                                          const struct clock_ops *clock,
                                          struct maas_inventories **ret,
                                          char **reterr);
/* Frees mi (after the webhook server and the controllers have stopped using it). */
struct maas_inventories *maas_inventories_free(struct maas_inventories *mi);
/* The webhooks' source (webhooks.h) backed by mi (NULL = none). Valid as long as mi. */
const struct webhooks_inventory_source *maas_inventories_source(struct maas_inventories *mi);
/* How many identities' inventories the cache lists now (tests, metrics). */
size_t maas_inventories_count(struct maas_inventories *mi);
/* The controllers' source (provider.h) backed by mi (NULL = none): acquire by the Secret's
 * name (the controllers know it from the MaasCluster informer), the refresh listener.
 * Valid as long as mi. */
const struct provider_inventory_source *maas_inventories_provider_source(
        struct maas_inventories *mi);
