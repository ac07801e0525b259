#pragma once
/*
 * reconciler: state shared by the MaasCluster and MaasMachine reconcilers (internal to the
 * reconcile library; main.c sees only provider.h).
 *
 * struct provider is created once; its informers, controllers and recorder are owned by
 * it. struct reconciler_worker (worker.h) is one per worker thread (its own kube and MAAS
 * clients, as libcurl handles are per thread). The in-memory tables (power readings, node
 * providerIDs done, API-server probe backoff) are guarded by p->lock; the MAAS fleet
 * snapshot by p->fleet_lock. Nothing here must survive a restart: everything can be rebuilt from
 * the objects and MAAS.
 */

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "capi_objects.h"
#include "controller.h"
#include "http_transport.h"
#include "informer.h"
#include "json.h"
#include "kube_client.h"
#include "maas_client.h"
#include "provider.h"
#include "schema.h"

struct controller;
struct event_recorder;
struct metric_family;

#define RECONCILER_ANNOTATION_DEPLOY_STARTED  "maas.infrastructure.cluster.x-k8s.io/deploy-started"
#define RECONCILER_ANNOTATION_FAILED_HOSTS    "maas.infrastructure.cluster.x-k8s.io/failed-machines"
#define RECONCILER_ANNOTATION_DELETE_FOR_MOVE "clusterctl.cluster.x-k8s.io/delete-for-move"
#define RECONCILER_CAPI_GROUP                 "cluster.x-k8s.io"
/* On a MaasCluster: the FQDN of the MAAS DNS record capmaas created for the API endpoint.
 * It says which record is ours (so a Cluster endpoint equal to it is not user-set) and is
 * kept in metadata because clusterctl move copies metadata and spec, never status, and
 * gives the object a new UID. */
#define RECONCILER_ANNOTATION_DNS_RECORD      "maas.infrastructure.cluster.x-k8s.io/dns-record"
/* The MAAS machine a static address was linked on (until it is unlinked again), and the
 * static address's backoff: "<failures> <not before, unix s>" (maasmachine_network.c). */
#define RECONCILER_ANNOTATION_STATIC_IP_HOST  "maas.infrastructure.cluster.x-k8s.io/static-ip-host"
#define RECONCILER_ANNOTATION_STATIC_IP_RETRY "maas.infrastructure.cluster.x-k8s.io/static-ip-retry"
/* A deploy MAAS refused (the machine released): "<failures> <not before, unix s>"; no new
 * allocation before then (maasmachine_deploy.c). */
#define RECONCILER_ANNOTATION_DEPLOY_RETRY    "maas.infrastructure.cluster.x-k8s.io/deploy-retry"
/* Ready's reason while an object waits for what it owns to go (CAPI's Deleting). */
#define RECONCILER_REASON_DELETING            "Deleting"

/* The phases of capmaas_maasmachines{phase} (fleet_snapshot.c names them). */
#define RECONCILER_MM_PHASES 6

/* A small string-keyed table (system id or ns/name → value). */
struct reconciler_entry {
        char *key;
        int64_t a, b; /* meaning is per table */
        void *ptr;    /* per table; the table never frees it */
};

/* A string-keyed table: items dense (iterate items[0..n), entry pointers valid until the
 * next put or del), found through a linear-probing index (slots hold item index + 1), so
 * tables of 10 000 machines cost O(1) a lookup. */
struct reconciler_table {
        struct reconciler_entry *items;
        size_t n, cap;
        size_t *slots;
        size_t n_slots; /* a power of two, at least twice cap; 0 before the first put */
};

struct reconciler_fleet {
        struct maas_node_list nodes; /* last list of the machines of its kind, by system_id */
        char **asked;                /* the system ids that list asked for, sorted (owned) */
        size_t n_asked;
        uint64_t fetched_ms; /* clock_now_ms at the last attempt; 0 = never */
        uint64_t every_ms;   /* due this long after fetched_ms; 0 = the kind's default */
        bool valid;
        bool refreshing; /* a worker is fetching the next list (without the lock) */
        int err;         /* the last attempt's error; 0 after a success */
};

/* The four MAAS lists of one MAAS (fleet_snapshot.h): the process-wide one's in struct
 * provider, a per-cluster identity's in struct maas_ident (maas_identity.h). */
struct reconciler_fleets {
        struct reconciler_fleet fleet;    /* Deployed machines */
        struct reconciler_fleet inflight; /* Allocated and Deploying machines */
        struct reconciler_fleet unplaced; /* machines stamped for MaasMachines without one */
        struct reconciler_fleet deleting; /* the machines of deleting MaasMachines */
};

struct maas_ident_pool;

struct provider {
        struct provider_settings settings;
        const struct kube_config *kube;
        struct token_bucket *limiter;
        const struct maas_config *maas;
        struct token_bucket *maas_budget; /* borrowed */
        struct metrics *metrics;
        const struct clock_ops *clock;
        const char *maas_ca_file;
        bool maas_insecure;
        struct maas_inventory *inventory; /* borrowed; NULL = none */
        /* borrowed; NULL = none: the inventories of the per-cluster MAAS (provider.h) */
        const struct provider_inventory_source *ident_inventories;
        /* per-cluster MAAS credentials (spec.identityRef; maas_identity.h), owned */
        struct maas_ident_pool *idents;

        struct capi_api capi;      /* the Cluster API version served (provider_discover) */
        struct capi_ipam_api ipam; /* the IPAM contract's version, "" when not served */
        struct informer *maasmachines, *maasclusters, *machines, *clusters;
        struct informer *ipclaims; /* IPAddressClaims; NULL when IPAM is not served */
        bool ipam_forbidden;       /* served, but our RBAC may not list the claims */
        /* MaasMachineTemplates and their controller; both NULL without an inventory */
        struct informer *templates;
        struct controller *template_ctl;
        /* a digest of the zones holding machines at the last refresh the listener saw */
        _Atomic uint64_t zones_digest;
        struct controller *machine_ctl, *cluster_ctl;
        /* MaasRemediations and their controller; NULL when the kind is not served or our
         * RBAC may not list it (an older release's CRDs and role). */
        struct informer *maasremediations;
        struct controller *remediation_ctl;
        struct event_recorder *events;

        struct metric_family *maas_requests; /* capmaas_maas_requests_total{op,code} */
        struct metric_family *phase_seconds; /* capmaas_machine_phase_seconds{phase} */
        struct metric_family *replaced;      /* capmaas_machine_replacements_total{reason} */
        struct metric_family *hosts_lost;    /* capmaas_maasmachine_host_lost_total{reason} */
        /* capmaas_maas_deploy_failures_total{reason} (reconciler_deploy_failed) */
        struct metric_family *deploy_failures;
        /* capmaas_maasmachines{phase}: the MaasMachines in each phase, kept with fleet_index
         * (fleet_snapshot.c); NULL without metrics */
        struct metric_series *mm_phase[RECONCILER_MM_PHASES];
        struct metric_family *remediations;             /* capmaas_remediations_total{result} */
        struct metric_series *remediation_power_cycles; /* ..._remediation_power_cycles_total */
        struct metric_series *remediations_in_progress; /* capmaas_remediations_in_progress */
        /* host reuse (maasmachine_reuse.h): capmaas_host_reuse_allocations_total{source},
         * _waiting_hosts, _tags_expired_total; under p->lock: reuse_untagged (system id → a:
         * wall s of our untag), reuse_tags ("<maas> <tag>": the reuse tags kept in each MAAS,
         * "-" the process-wide one, else the identity's "ns/secret"; a: wall s seen),
         * reuse_swept ("<maas>" → a: ms of its last sweep, b: its hosts waiting). The hold
         * times themselves live in MAAS, in each tag's comment. */
        struct metric_family *reuse_allocations;
        struct metric_series *reuse_waiting, *reuse_expired;
        struct reconciler_table reuse_untagged;
        struct reconciler_table reuse_tags;
        struct reconciler_table reuse_swept;

        pthread_mutex_t lock;
        struct reconciler_table
                power_off_reads;           /* system id → consecutive confirmed offs, last on */
        struct reconciler_table node_done; /* system id → 1 once the Node has our providerID */
        struct reconciler_table api_probe; /* ns/name → failures, next probe ms */
        struct reconciler_table allocate_tried; /* MaasMachine UID → an allocate was sent */
        /* MaasMachine UID → the unplaced list found nothing stamped for it: asked once */
        struct reconciler_table unplaced_none;
        struct reconciler_table released; /* UID/system id → wall s of our release */
        /* endpoint record fqdn → ptr: struct maas_dns_resource as MAAS last answered or as
         * we last wrote it, a = clock_now_ms then (reconciler_dns_*) */
        struct reconciler_table dns_records;
        struct reconciler_table claimed; /* MaasMachine UID → wall s of our IPAddressClaim create */
        /* MaasMachine UID → a: failures, b: wall s not before which a refused static address
         * is tried again, as last written to its static-ip-retry annotation */
        struct reconciler_table static_ip_retry;
        struct reconciler_table remediating; /* ns/name of the MaasRemediations in progress */
        /* MaasRemediation UID → a: the retryCount its last power cycle wrote, b: 1 once its
         * outcome (a final phase) was written; a cache that has not caught up with these
         * writes must not act on them again. Gone with the finalizer. */
        struct reconciler_table remediation_cycles;
        /* "ns/cluster/MaasMachine UID" → a: the VM host id chosen for its VM, ptr: its name
         * (owned: freed with the entry); maasmachine_compose.c */
        struct reconciler_table vm_hosts;
        /* MaasMachine UID → a: no-fit failures, b: not before (wall s), as last written to the
         * vm-compose-retry annotation (maasmachine_compose.c) */
        struct reconciler_table vm_retry;
        /* MaasMachine UID → a: refused deploys in a row, b: not before (wall s), as last
         * written to the deploy-retry annotation (maasmachine_deploy.c) */
        struct reconciler_table deploy_retry;

        pthread_mutex_t fleet_lock;
        pthread_cond_t fleet_cond; /* a refresh finished (with fleet_lock) */
        /* the process-wide MAAS's lists (fleet_snapshot.h); an identity has its own */
        struct reconciler_fleets fleets;
        /* What the lists need of each MaasMachine, kept by the informer's events (ns/name →
         * ptr: struct fleet_rec, fleet_snapshot.c), so a list reads 10 000 small records
         * instead of parsing 10 000 cached objects. Guarded by fleet_index_lock. */
        pthread_mutex_t fleet_index_lock;
        struct reconciler_table fleet_index;
        bool started;
        atomic_bool stopping; /* set first by provider_stop: retry sleeps end at once */
};

struct reconciler_worker; /* worker.h */

/* FNV-1a of n bytes: the tables' index, the kept workload clients' Secret digest, the
 * inventory's zone set. Any thread. */
uint64_t reconciler_digest(const char *s, size_t n);

/* --- tables (callers hold p->lock) --- */
struct reconciler_entry *reconciler_table_get(struct reconciler_table *t, const char *key);
struct reconciler_entry *reconciler_table_put(struct reconciler_table *t, const char *key);
void reconciler_table_del(struct reconciler_table *t, const char *key);
void reconciler_table_release(struct reconciler_table *t);

/* --- CAPI lookups (informer cache; every returned kube_object is a new reference) --- */
/* The owner Machine of a MaasMachine, or NULL. */
struct kube_object *reconciler_owner(struct provider *p,
                                     const struct schema_meta *meta,
                                     const char *kind);
/* Cluster named by obj's cluster-name label in ns, or NULL. */
struct kube_object *reconciler_cluster_of(struct provider *p, const char *ns, const cJSON *obj);
/* Why reconciling obj is paused (a message for the Paused condition), or NULL: the
 * Cluster's spec.paused (either CAPI version), or the cluster.x-k8s.io/paused annotation
 * on the Cluster or on obj (any value). Either may be NULL. */
const char *reconciler_pause_cause(const cJSON *cluster, const cJSON *obj);
/* obj carries cluster.x-k8s.io/managed-by (any value): another controller manages it and
 * capmaas leaves it alone (kubernetes.md §4.1). */
bool reconciler_externally_managed(const cJSON *obj);

/* Sleeps ms in 50 ms slices; returns false as soon as the provider is stopping (at once when
 * it already is), true after the whole wait. */
bool reconciler_sleep(struct provider *p, uint64_t ms);

/* Seconds since the epoch of an RFC 3339 UTC time ("2026-01-02T03:04:05Z"), or -1. */
int64_t reconciler_parse_time(const char *s);
/* Observes now - since (RFC 3339, or decimal seconds for our annotations) in
 * capmaas_machine_phase_seconds{phase}. */
void reconciler_observe_phase(struct provider *p, const char *phase, const char *since, time_t now);

/* --- conditions, events and writes shared by both reconcilers --- */
/* Where a reconciler writes the conditions of the object it reconciles; every pointer is
 * into that reconcile's context, which outlives it. */
struct reconciler_conditions {
        struct schema_conditions *list;
        bool *status_present;      /* set when a condition is written */
        const int64_t *generation; /* metadata.generation -> observedGeneration */
        const time_t *now;         /* lastTransitionTime */
};

/* Sets a condition (message formatted from fmt, "" when fmt is NULL). */
void reconciler_cond(const struct reconciler_conditions *at,
                     const char *type,
                     const char *status,
                     const char *reason,
                     const char *fmt,
                     ...) PRINTF_LIKE(5, 6);
/* Sets the v1beta2 Paused condition: True (reason Paused, the cause as message) when
 * reconciler_pause_cause says so, else False (reason NotPaused). Returns whether paused. */
bool reconciler_pause_condition(const struct reconciler_conditions *at,
                                const cJSON *cluster,
                                const cJSON *obj);
/* Queues an event about obj; nothing when the provider has no recorder. */
void reconciler_event(struct provider *p,
                      const cJSON *obj,
                      const char *type,
                      const char *reason,
                      const char *fmt,
                      ...) PRINTF_LIKE(5, 6);
/* Ready from the listed conditions (CAPI's summary: any False wins, then any Unknown or
 * missing, else True). */
void reconciler_ready_summary(const struct reconciler_conditions *at,
                              const char *const *types,
                              size_t n);
/* Writes the difference between *cur (what this pass read and wrote) and after (consumed):
 * metadata and spec only when metadata_only, status kept as in *cur. On success *cur becomes
 * after, so the next write of the pass diffs against it; ret_writes (may be NULL) counts the
 * PATCH calls. The diff is never against the server's latest copy, so whatever another
 * client changed meanwhile is left as they wrote it. */
MUST_CHECK int reconciler_write(struct reconciler_worker *w,
                                const struct kube_resource *r,
                                cJSON **cur,
                                cJSON *after,
                                bool metadata_only,
                                unsigned *ret_writes);

/* --- the endpoint records MAAS holds, as last seen (p->dns_records; takes p->lock) --- */
/* A copy of fqdn's record when it was read or written within --machine-refresh-interval:
 * true, *ret filled (maas_dns_resource_release it); false otherwise (read MAAS). */
bool reconciler_dns_cached(struct provider *p, const char *fqdn, struct maas_dns_resource *ret);
/* Remembers rec (copied) as fqdn's record now; rec NULL forgets it (deleted, or a failure
 * that leaves MAAS's state unknown). */
void reconciler_dns_remember(struct provider *p,
                             const char *fqdn,
                             const struct maas_dns_resource *rec);
/* Frees the whole cache (provider teardown). */
void reconciler_dns_forget_all(struct provider *p);

/* --- MAAS accounting --- */
/* Counts a MAAS call in capmaas_maas_requests_total{op,code} (code from the error). */
void reconciler_maas_count(struct provider *p, const char *op, int rc, const struct maas_error *e);

/* Deploy failure reasons (capmaas_maas_deploy_failures_total{reason}); the first two are also
 * capmaas_machine_replacements_total's. */
#define RECONCILER_DEPLOY_FAILED  "DeployFailed"  /* MAAS: Failed deployment */
#define RECONCILER_DEPLOY_TIMEOUT "DeployTimeout" /* past --deploy-timeout */
#define RECONCILER_DEPLOY_REFUSED "DeployRefused" /* MAAS refused swap off or deploy */
/* Counts a deploy that did not complete in capmaas_maas_deploy_failures_total{reason}. */
void reconciler_deploy_failed(struct provider *p, const char *reason);
/* Creates, at zero, the series of every deploy failure and replacement reason, so that
 * increase() and rate() count the first one (provider_new, after the families are
 * registered). */
MUST_CHECK int reconciler_metrics_zero(struct provider *p);

/* --- workload cluster (through the <cluster>-kubeconfig Secret) --- */
/*
 * A client for the workload API of cluster ns/name, kept by the worker: *ret is borrowed,
 * valid until this worker's next reconciler_workload_client or reconciler_workload_drop
 * call. The kubeconfig Secret is read again when the client is older than 30 s, and the
 * client rebuilt only when the Secret's value changed, so a fleet of machines shares one
 * TLS connection per worker instead of a handshake per pass. CM_ENOTFOUND when the Secret
 * does not exist yet. Call reconciler_workload_drop after a request through it failed.
 */
MUST_CHECK int reconciler_workload_client(struct reconciler_worker *w,
                                          const char *ns,
                                          const char *cluster,
                                          struct kube_client **ret);
/* Forgets ns/cluster's kept client (a failed call: a rotated key, a moved endpoint); the
 * next reconciler_workload_client reads the Secret again. */
void reconciler_workload_drop(struct reconciler_worker *w, const char *ns, const char *cluster);
struct workload_conn;
/* Frees a kept client (worker.c, at the worker's end). */
void reconciler_workload_conn_release(struct workload_conn *c);

/* --- the MAAS of a pass (spec.identityRef; maas_identity.h, docs/credentials.md) --- */
/* The condition a cluster naming an identity gets on its MaasCluster and MaasMachines. */
#define RECONCILER_COND_MAAS_AVAILABLE "MAASAvailable"
/*
 * Points w at the MAAS this pass must use: secret (the MaasCluster's spec.identityRef.name),
 * else the Secret the cluster ns/cluster names (the pool's cluster table), else nothing: the
 * process-wide MAAS, and true with nothing written. With an identity: true and the
 * MAASAvailable condition True; or, when it cannot be used (no Secret, malformed, 401,
 * unreachable), false after setting MAASAvailable False with the reason and a message without
 * the key, a Warning event about obj, and res to come back after the failure's backoff: the
 * pass then writes its status and ends. A deleting MaasMachine or MaasCluster whose Secret is
 * missing or malformed is told so: what it cannot release without the credentials (the
 * MaasMachine's system ID), and that its finalizer stays until the Secret is back.
 * reconciler_worker_use_default ends what this began.
 */
bool reconciler_maas_pick(struct reconciler_worker *w,
                          const char *ns,
                          const char *cluster,
                          const char *secret,
                          const struct reconciler_conditions *conds,
                          const cJSON *obj,
                          struct reconcile_result *res);
/*
 * The inventory of the MAAS the Secret ns/secret names (p->ident_inventories): its snapshot
 * with a reference (maas_inventory_snapshot_release) when it may be used (MAAS_INV_OK), else
 * NULL: no source, the Secret unusable (logged at debug, never the key), or the inventory
 * not loaded yet, stale or failed (its listener brings the object back after a refresh).
 * Any thread; it may read the Secret.
 */
struct maas_inventory_snapshot *reconciler_ident_inventory(struct provider *p,
                                                           const char *ns,
                                                           const char *secret);
/* Queues the MaasMachineTemplates of every cluster naming Secret ns/secret, and its
 * MaasClusters when the zones holding machines in snap changed since the last refresh of
 * that MAAS: the ident_inventories listener (provider.c). */
void reconciler_ident_inventory_refreshed(void *arg,
                                          const char *ns,
                                          const char *secret,
                                          const struct maas_inventory_snapshot *snap);
