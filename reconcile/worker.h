#pragma once
/*
 * worker: one reconcile worker's own clients (internal). Each controller worker thread
 * has a kube_client for the management cluster and a maas_client, since libcurl handles
 * are per thread; a worker also names the transport its workload-cluster clients use.
 *
 * reconciler_worker_new() is what provider.c's controllers call with no options (libcurl
 * everywhere, retry waits that end once the provider stops). Unit tests call it with fake
 * transports (http_transport.h) and a recording sleep, then run maasmachine_reconcile /
 * maascluster_reconcile on the calling thread: no thread, no libcurl, no sleep.
 *
 * Ownership: transports given in the options are borrowed and must outlive the worker;
 * the ones the worker made itself are owned. One thread at a time uses a worker.
 */

#include <stdint.h>

#include "compiler.h"
#include "http_transport.h"
#include "kube_client.h"
#include "maas_client.h"

struct provider;

/* MAAS clients a worker keeps for per-cluster identities (maas_identity.h), one per identity
 * it recently served: the TLS connection to that MAAS is kept across passes. */
#define IDENT_CONNS 4

struct ident_conn {
        struct maas_ident *id; /* a reference; NULL = free slot */
        struct http_transport *transport;
        struct maas_client *client;
        uint64_t used; /* the worker's use counter at the last use (LRU) */
};

/* Workload API clients a worker keeps (one per cluster it recently served). */
#define WORKLOAD_CONNS 4

struct workload_conn {
        char *key;           /* "<namespace>/<cluster>"; NULL = free slot */
        uint64_t digest;     /* of the kubeconfig Secret's value */
        uint64_t checked_ms; /* when the Secret was last read */
        uint64_t used;       /* the worker's use counter at the last use (LRU) */
        struct kube_config cfg;
        struct kube_client *client; /* borrows cfg */
};

struct reconciler_worker {
        struct provider *p;
        struct kube_client *kube;
        struct http_transport *maas_transport; /* owned when own_maas_transport */
        bool own_maas_transport;
        /* The MAAS of the current pass: maas_default, or the client of the pass's identity
         * (reconciler_maas_pick); every step calls MAAS through it. */
        struct maas_client *maas;
        struct maas_client *maas_default; /* the process-wide MAAS (owned) */
        struct maas_ident *ident;         /* the pass's identity (a reference), NULL = default */
        struct reconciler_fleets *fleets; /* the current MAAS's lists: &p->fleets or ident's */
        struct ident_conn idconn[IDENT_CONNS];
        uint64_t ident_uses;
        void (*sleep_ms)(void *ud, uint64_t ms); /* the MAAS clients' retry sleep */
        void *sleep_ud;
        struct http_transport *workload_transport; /* borrowed; NULL = libcurl */
        /* Kept so one TLS connection serves many passes (reconciler_workload_client). */
        struct workload_conn workload[WORKLOAD_CONNS];
        uint64_t workload_uses;
};

struct reconciler_worker_opts {
        struct http_transport *kube_transport;     /* management cluster; NULL = libcurl */
        struct http_transport *maas_transport;     /* MAAS region; NULL = libcurl */
        struct http_transport *workload_transport; /* workload API servers; NULL = libcurl */
        /* MAAS retry waits (maas_client_opts.sleep_ms); NULL = nanosleep slices that end
         * as soon as the provider stops. */
        void (*sleep_ms)(void *ud, uint64_t ms);
        void *sleep_ud;
};

/* A worker of p (o may be NULL: libcurl everywhere). Errors as kube_client_new,
 * http_transport_curl_new and maas_client_new. */
MUST_CHECK int reconciler_worker_new(struct provider *p,
                                     const struct reconciler_worker_opts *o,
                                     struct reconciler_worker **ret);
/* Accepts NULL; returns NULL. */
struct reconciler_worker *reconciler_worker_free(struct reconciler_worker *w);

/* Makes id (the pass's reference, taken) the worker's current MAAS: w->maas becomes this
 * worker's kept client of it (built on first use; clients of retired identities are dropped
 * first), w->fleets its lists. Errors as http_transport_curl_new and maas_client_new (the
 * reference is then dropped and the default stays). */
MUST_CHECK int reconciler_worker_use_ident(struct reconciler_worker *w, struct maas_ident *id);
/* Back to the process-wide MAAS; drops the pass's identity reference. Safe when current. */
void reconciler_worker_use_default(struct reconciler_worker *w);
