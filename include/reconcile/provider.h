#pragma once
/*
 * provider: the infrastructure provider itself — the MaasCluster, MaasMachine and
 * MaasMachineTemplate controllers with the informers they read (MaasCluster, MaasMachine,
 * MaasMachineTemplate, CAPI Cluster and Machine) and the event recorder they write through. main.c
 * creates one, starts it when this replica becomes the leader and stops it on shutdown.
 *
 * Threads: provider_start/stop/free from one thread (main or the leader elector's
 * callback). Inside: one watch thread per informer, --machine-concurrency MaasMachine
 * workers, --maascluster-concurrency MaasCluster workers, one event writer. Ownership:
 * every option is borrowed and must outlive the provider.
 */

#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"

struct clock_ops;
struct kube_config;
struct token_bucket;
struct maas_config;
struct maas_inventory;
struct maas_inventory_snapshot;
struct metrics;
struct provider;
struct token_bucket;

/* What the controllers do and over which objects (from the process's flags). */
struct provider_settings {
        const char *namespace;        /* "" or NULL = all namespaces */
        const char *watch_filter;     /* cluster.x-k8s.io/watch-filter value; "" = none */
        uint64_t sync_period_ms;      /* informer resync; 0 = never */
        unsigned machine_concurrency; /* MaasMachine workers; 0 = 1 */
        unsigned cluster_concurrency; /* MaasCluster workers; 0 = 1 */
        uint64_t deploy_timeout_ms;   /* a deploy older than this is replaced */
        uint64_t machine_refresh_ms;  /* Deployed machines are re-read this often */
        uint64_t maas_timeout_ms;     /* total per MAAS call; 0 = the transport's default */
        /* each per-cluster MAAS's own budget (spec.identityRef): --maas-api-qps/-burst */
        double maas_api_qps;
        unsigned maas_api_burst;
        bool release_erase;       /* erase disks on release */
        bool release_quick_erase; /* ... with MAAS's quick erase */
        uint64_t reuse_hold_ms;   /* a kept host loses its reuse tag after this unused */
};

/* Called after an inventory of the source refreshed, for the identity Secret ns/secret
 * (borrowed snapshot; the maas_inventory_listener_fn rules apply: queue keys only). */
typedef void provider_ident_inventory_fn(void *arg,
                                         const char *ns,
                                         const char *secret,
                                         const struct maas_inventory_snapshot *snap);

/*
 * The inventories of the per-cluster MAAS (spec.identityRef), kept by the server
 * (server/maas_inventories.h, shared with admission): the MaasMachineTemplates of such a
 * cluster get their capacity, and its MaasCluster its discovered failure domains, from the
 * MAAS its identity names. acquire: the inventory of Secret ns/secret, referenced until
 * release, or a negative code and *ret_why (malloc'd, no key in it); any thread, it may read
 * the Secret. set_listener: the one listener (fn NULL removes it; when it returns, no call of
 * the previous one runs). Borrowed: it outlives the provider.
 */
struct provider_inventory_source {
        int (*acquire)(void *ud,
                       const char *ns,
                       const char *secret,
                       struct maas_inventory **ret,
                       char **ret_why);
        void (*release)(void *ud, struct maas_inventory *inv);
        void (*set_listener)(void *ud, provider_ident_inventory_fn *fn, void *arg);
        void *ud;
};

struct provider_opts {
        struct provider_settings settings; /* copied; its strings are borrowed */
        const struct kube_config *kube;    /* management cluster */
        struct token_bucket *limiter;      /* NULL = unlimited */
        const struct maas_config *maas;    /* MAAS region */
        struct token_bucket *maas_budget;  /* shared MAAS request budget; NULL = unlimited */
        struct metrics *metrics;           /* NULL = none */
        const struct clock_ops *clock;     /* NULL = system */
        const char *maas_ca_file;          /* NULL = system CAs */
        /* The MAAS inventory cache (borrowed; NULL = none): MaasMachineTemplates' capacity
         * and the MaasCluster's discovered failure domains come from it. */
        struct maas_inventory *inventory;
        /* The per-cluster MAAS's inventories (borrowed; NULL = none: a cluster with
         * spec.identityRef then gets only its spec.failureDomains, its templates no capacity). */
        const struct provider_inventory_source *ident_inventories;
        bool maas_insecure_skip_verify;
};

MUST_CHECK int provider_new(const struct provider_opts *o, struct provider **ret);
/* Discovers which Cluster API version the cluster serves (cluster.x-k8s.io v1beta2, else
 * v1beta1; retried with backoff for up to 60 s, never guessed), starts the informers on it,
 * waits for their first lists (up to 60 s), then the controllers. */
MUST_CHECK int provider_start(struct provider *p);
/* Stops controllers (each worker finishes its reconcile), informers and events. */
void provider_stop(struct provider *p);
struct provider *provider_free(struct provider *p);
