#pragma once
/*
 * provider: the infrastructure provider itself — the MaasCluster and MaasMachine
 * controllers with the informers they read (MaasCluster, MaasMachine, CAPI Cluster and
 * Machine) and the event recorder they write through. main.c creates one, starts it when
 * this replica becomes the leader and stops it on shutdown.
 *
 * Threads: provider_start/stop/free from one thread (main or the leader elector's
 * callback). Inside: one watch thread per informer, --machine-concurrency MaasMachine
 * workers, --maascluster-concurrency MaasCluster workers, one event writer. Ownership:
 * every option is borrowed and must outlive the provider.
 */

#include <stdbool.h>

#include "compiler.h"

struct clock_ops;
struct config;
struct kube_config;
struct kube_ratelimit;
struct maas_config;
struct metrics;
struct provider;

struct provider_opts {
        const struct config *cfg;       /* flags: concurrency, timeouts, scope */
        const struct kube_config *kube; /* management cluster */
        struct kube_ratelimit *limiter; /* NULL = unlimited */
        const struct maas_config *maas; /* MAAS region */
        struct metrics *metrics;        /* NULL = none */
        const struct clock_ops *clock;  /* NULL = system */
        const char *maas_ca_file;       /* NULL = system CAs */
        bool maas_insecure_skip_verify;
};

MUST_CHECK int provider_new(const struct provider_opts *o, struct provider **ret);
/* Starts informers, waits for their first lists (up to 60 s), then the controllers. */
MUST_CHECK int provider_start(struct provider *p);
/* Stops controllers (each worker finishes its reconcile), informers and events. */
void provider_stop(struct provider *p);
struct provider *provider_free(struct provider *p);
