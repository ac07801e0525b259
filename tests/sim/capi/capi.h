#pragma once
/*
 * capi-sim: the Cluster API core and kubeadm controllers, as far as an infrastructure
 * provider sees them (design.md §5, kubernetes.md §4), built on our reconcile runtime.
 *
 * Controllers (each a struct controller with its own work queue and workers):
 *   - cluster: Cluster → ownerReference + label on its MaasCluster and KubeadmControlPlane,
 *     infrastructure state, endpoint and control-plane state back into the Cluster;
 *     deletion of everything below a deleted Cluster (finalizer cluster.cluster.x-k8s.io);
 *   - kcp / md: KubeadmControlPlane and MachineDeployment replicas → Machines (scale up
 *     and down), replicas/readyReplicas; the KCP writes the <cluster>-kubeconfig Secret;
 *     a changed template rolls out as CAPI's does (rollout.c): a MachineDeployment through
 *     a new MachineSet within maxSurge/maxUnavailable, a KubeadmControlPlane one control
 *     plane at a time, new before old unless rolloutStrategy.rollingUpdate.maxSurge is 0;
 *   - machine: bootstrap Secret, MaasMachine from the template, Node in the workload API,
 *     status mirrored from the MaasMachine, deletion (finalizer machine.cluster.x-k8s.io);
 *     standing in for kubelet, the Node's Ready goes Unknown while the MaasMachine is not
 *     ready (its host is off or gone) and back to True when it is;
 *   - machinehealthcheck: marks unhealthy Machines OwnerRemediated False (mhc.c); the KCP and
 *     MD controllers delete them and create replacements, as CAPI's owner remediation; with
 *     a remediation template, CAPI's external remediation: the remediation object named
 *     after the Machine, deleted again once the Machine is healthy, and the provider's
 *     OwnerRemediated False acted on as above;
 *   - with --maas-sim, the Nodes' Ready follows maas-sim's kubelets (kubelets.c);
 *   - ipaddressclaim / inclusterippool (ipam.c): the in-cluster IPAM provider
 *     (kubernetes-sigs/cluster-api-ipam-provider-in-cluster) standing beside CAPI: a claim of
 *     an InClusterIPPool or GlobalInClusterIPPool gets an IPAddress named after it, the
 *     lowest free address of the pool; releasing the claim deletes it; pools count their
 *     addresses in status.ipAddresses.
 *
 * Ownership: struct capi owns the informers, controllers and the owner index; everything is
 * built by main before any thread starts and torn down after every thread stopped.
 * Threads: informer threads run the index handlers; controller workers run the reconciles
 * with their own clients (struct capi_worker). The index has its own lock.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "controller.h"
#include "informer.h"
#include "json.h"
#include "kube_client.h"
#include "rollout_rules.h"

#define CAPI_GROUP             "cluster.x-k8s.io"
#define CAPI_FINALIZER_CLUSTER "cluster.cluster.x-k8s.io"
#define CAPI_FINALIZER_MACHINE "machine.cluster.x-k8s.io"
#define CAPI_LABEL_DEPLOYMENT  "cluster.x-k8s.io/deployment-name"
#define CAPI_LABEL_SET         "cluster.x-k8s.io/set-name"
#define CAPI_LABEL_HASH        "machine-template-hash"
#define CAPI_LABEL_CP_NAME     "cluster.x-k8s.io/control-plane-name"
#define CAPI_ANN_TEMPLATE      "cluster.x-k8s.io/cloned-from-name"
#define CAPI_ANN_MACHINE       "cluster.x-k8s.io/machine"
#define CAPI_ANN_CLUSTER_NS    "cluster.x-k8s.io/cluster-namespace"
#define CAPI_SECRET_TYPE       "cluster.x-k8s.io/secret"
#define CAPI_CREATE_BATCH      50 /* Machines created per owner reconcile */

/* The contract capi-sim plays (--capi-contract): v1beta2 as CAPI 1.11+ (every core,
 * control-plane and bootstrap kind served and stored as v1beta2, written in v1beta2 shapes:
 * status.initialization.*, references {apiGroup, kind, name}, nodeRef {name}), or v1beta1
 * as CAPI 1.10. Set by main before any thread starts; read-only afterwards. */
struct capi_contract {
        bool v1beta2;
        const char *version;      /* "v1beta2" or "v1beta1" */
        char api_version[64];     /* cluster.x-k8s.io/<version> */
        char kcp_api_version[64]; /* controlplane.cluster.x-k8s.io/<version> */
};
extern struct capi_contract capi_contract;
/* Sets capi_contract and the versions of the resources below; CM_EINVAL for another. */
MUST_CHECK int capi_set_contract(const char *version);

/* The owner controllers' paths for capi_contract (called by capi_set_contract). */
void capi_owner_set_contract(void);

/* Cluster, Machine, KubeadmControlPlane, MachineDeployment, MachineSet, MachineHealthCheck
 * at the contract's version. */
extern struct kube_resource CAPI_RES_CLUSTERS, CAPI_RES_MACHINES, CAPI_RES_KCPS, CAPI_RES_MDS,
        CAPI_RES_MSS, CAPI_RES_MHCS;

/* The two kinds that own Machines. */
enum capi_owner_kind {
        CAPI_OWNER_KCP,
        CAPI_OWNER_MD,
        CAPI_OWNER_KINDS,
};

/* ---- owner index: Machines grouped by their controlling KCP/MD ---- */

struct capi_index;

struct capi_index *capi_index_new(void);
struct capi_index *capi_index_free(struct capi_index *x);
/* The machines informer's handler (arg = the index). */
struct informer_handler capi_index_handler(struct capi_index *x);
/* Records a Machine just created (before the informer sees it: m's name, failure_domain,
 * hash, tmpl and version are copied) / just deleted by us. */
void capi_index_put_local(struct capi_index *x,
                          enum capi_owner_kind k,
                          const char *ns,
                          const char *owner,
                          const struct capi_member *m);
void capi_index_mark_deleting(struct capi_index *x,
                              enum capi_owner_kind k,
                              const char *ns,
                              const char *owner,
                              const char *machine);
/* Copies the members of owner ns/name (malloc'd array, oldest first; *ret NULL when none). */
size_t capi_index_members(struct capi_index *x,
                          enum capi_owner_kind k,
                          const char *ns,
                          const char *owner,
                          struct capi_member **ret);

/* ---- the simulator ---- */

struct capi {
        const struct kube_config *mgmt, *workload; /* borrowed */
        char *kubeconfig_b64;                      /* the workload kubeconfig, base64 */
        struct informer *clusters, *maasclusters, *kcps, *mds, *mss, *machines, *maasmachines,
                *templates, *nodes, *mhcs, *ipclaims, *ipaddresses, *pools, *gpools;
        struct controller *cluster_ctl, *owner_ctl[CAPI_OWNER_KINDS], *machine_ctl, *mhc_ctl,
                *ipclaim_ctl, *pool_ctl;
        struct capi_index *index;
        struct capi_kubelets *kubelets; /* NULL without --maas-sim */
        _Atomic uint64_t name_seed;
};

/* ---- rollouts (rollout.c; the rules in rollout_rules.h) ---- */

struct capi_worker;

#define CAPI_UID_LEN 64

/* The MachineDeployment's MachineSet (by owner name: a moved one keeps its sets) whose
 * machine-template-hash is <hash>-<suffix>: its name and label; false when none is cached. */
bool capi_md_find_set(struct capi_worker *w,
                      const struct kube_object *md,
                      const char *cluster,
                      const char *hash,
                      char name[CAPI_SET_NAME_LEN],
                      char label[CAPI_HASH_LEN]);
/* Makes the MachineDeployment's new MachineSet exist; uid gets its uid, "" when it exists
 * but the informer has not shown it yet (the caller creates no Machine this pass). */
MUST_CHECK int capi_md_new_set(struct capi_worker *w,
                               const struct kube_object *md,
                               const char *cluster,
                               const char *name,
                               const char *label,
                               size_t replicas,
                               char uid[CAPI_UID_LEN]);
/* Writes each MachineSet's replicas and status from m[0..n) (new_replicas for the new one,
 * new_name) and deletes old ones with no Machine left. */
MUST_CHECK int capi_md_sync_sets(struct capi_worker *w,
                                 const struct kube_object *md,
                                 const char *cluster,
                                 const char *new_name,
                                 const struct capi_member *m,
                                 size_t n,
                                 size_t new_replicas);

/* ---- kubelets (kubelets.c): with --maas-sim, Nodes follow maas-sim's kubelets ---- */

struct capi_kubelets;
/* Starts the poller of maas_sim_url (maas-sim's base, without /MAAS); after the informers
 * and controllers exist. */
MUST_CHECK int capi_kubelets_start(struct capi *s, const char *maas_sim_url);
/* Stops and frees the poller (before the controllers go); no-op without one. */
void capi_kubelets_stop(struct capi *s);
/* Whether the kubelet of MAAS machine system_id posts Ready: maas-sim's last answer for a
 * machine it lists; true without a poller or for a machine it does not list. Any thread. */
bool capi_kubelet_up(struct capi *s, const char *system_id);

/* Per-worker state: one client per API. */
struct capi_worker {
        struct capi *s;
        struct kube_client *kube, *wl;
};

MUST_CHECK int capi_cluster_reconcile(struct capi_worker *w,
                                      const char *ns,
                                      const char *name,
                                      struct reconcile_result *res);
MUST_CHECK int capi_owner_reconcile(struct capi_worker *w,
                                    enum capi_owner_kind k,
                                    const char *ns,
                                    const char *name,
                                    struct reconcile_result *res);
/* mhc.c: a MachineHealthCheck marks its unhealthy Machines for remediation. */
MUST_CHECK int capi_mhc_reconcile(struct capi_worker *w,
                                  const char *ns,
                                  const char *name,
                                  struct reconcile_result *res);
/* How long a Machine's or Node's change waits before it reaches the health checks: 3 s, or
 * 20 times the last pass when that is longer (a pass stays under 5% of a core). Any thread. */
uint64_t capi_mhc_coalesce_ms(void);
MUST_CHECK int capi_machine_reconcile(struct capi_worker *w,
                                      const char *ns,
                                      const char *name,
                                      struct reconcile_result *res);

/* ---- IPAM (ipam.c, ipset.c) ---- */

#define CAPI_IPAM_GROUP                "ipam.cluster.x-k8s.io"
#define CAPI_KIND_POOL                 "InClusterIPPool"
#define CAPI_KIND_GLOBAL_POOL          "GlobalInClusterIPPool"
#define CAPI_FINALIZER_RELEASE_ADDRESS "ipam.cluster.x-k8s.io/ReleaseAddress"
#define CAPI_FINALIZER_PROTECT_ADDRESS "ipam.cluster.x-k8s.io/ProtectAddress"
#define CAPI_FINALIZER_PROTECT_POOL    "ipam.cluster.x-k8s.io/ProtectPool"

/* IPAddressClaim and IPAddress at the contract's version (CAPI serves v1beta1 in 1.10 and
 * v1beta2 in 1.11); the in-cluster provider's pools at ipam.cluster.x-k8s.io/v1alpha2. */
extern struct kube_resource CAPI_RES_IPCLAIMS, CAPI_RES_IPADDRESSES;
extern const struct kube_resource CAPI_RES_POOLS, CAPI_RES_GLOBAL_POOLS;

/* A claim answered or not. The real provider (v1.0 and main) records nothing on a claim it
 * cannot answer and only logs; capi-sim also writes CAPI's IPAddressClaim Ready condition
 * (reasons from the contract: PoolNotReady for a missing pool, PoolExhausted,
 * AllocationFailed for a pool it cannot read), which CAPI defines for IPAM providers. */
MUST_CHECK int capi_ipclaim_reconcile(struct capi_worker *w,
                                      const char *ns,
                                      const char *name,
                                      struct reconcile_result *res);
/* A pool (ns "" = a GlobalInClusterIPPool): its ProtectPool finalizer (removed once no
 * address of it is left when it is deleted) and status.ipAddresses {total, used, free,
 * outOfRange}. */
MUST_CHECK int capi_pool_reconcile(struct capi_worker *w,
                                   const char *ns,
                                   const char *name,
                                   struct reconcile_result *res);
/* Watch mappings: an IPAddress → its claim / its pool; a pool → the claims of its namespace
 * (every namespace for a global pool); a Cluster → its claims (arg: the claims' informer). */
void capi_map_address_to_claim(void *arg,
                               const struct kube_object *obj,
                               void (*add)(void *ctl, const char *ns, const char *name),
                               void *ctl);
void capi_map_address_to_pool(void *arg,
                              const struct kube_object *obj,
                              void (*add)(void *ctl, const char *ns, const char *name),
                              void *ctl);
void capi_map_pool_to_claims(void *arg,
                             const struct kube_object *obj,
                             void (*add)(void *ctl, const char *ns, const char *name),
                             void *ctl);
void capi_map_cluster_to_claims(void *arg,
                                const struct kube_object *obj,
                                void (*add)(void *ctl, const char *ns, const char *name),
                                void *ctl);

/* IPv4 address sets (ipset.c): sorted, merged, inclusive ranges. */
#define CAPI_IPV4_LEN 16

struct capi_iprange {
        uint32_t from, to;
};

struct capi_ipset {
        struct capi_iprange *r; /* owned */
        size_t n;
};

/* What an InClusterIPPool's spec hands out. */
struct capi_pool {
        struct capi_ipset set; /* the assignable addresses */
        unsigned prefix;
        uint32_t gateway;
        bool has_gateway;
};

bool capi_ipv4_parse(const char *text, uint32_t *ret);
void capi_ipv4_format(uint32_t ip, char out[CAPI_IPV4_LEN]);
void capi_ipset_add(struct capi_ipset *s, uint32_t from, uint32_t to);
void capi_ipset_remove(struct capi_ipset *s, uint32_t from, uint32_t to);
bool capi_ipset_has(const struct capi_ipset *s, uint32_t ip);
uint64_t capi_ipset_count(const struct capi_ipset *s);
void capi_ipset_release(struct capi_ipset *s);
/* The pool's assignable set as the in-cluster provider builds it: spec.addresses (single
 * addresses, a-b ranges, CIDRs) less excludedAddresses, less the network and broadcast
 * address of the lowest address's subnet (unless allocateReservedIPAddresses), less the
 * gateway. CM_EINVAL with the offending field in why otherwise; *ret is the caller's
 * (capi_ipset_release(&ret->set)). */
MUST_CHECK int capi_pool_parse(const cJSON *spec, struct capi_pool *ret, char *why, size_t why_n);
/* The lowest address of p not in used[0..n_used) (sorted in place); false when none. */
bool capi_pool_first_free(const struct capi_pool *p, uint32_t *used, size_t n_used, uint32_t *ret);

/* ---- helpers (util.c) ---- */

/* The name of o's controlling ownerReference of `kind`, or of any ownerReference of that
 * kind when none controls; NULL when none. */
const char *capi_owner_name(const cJSON *o, const char *kind);
/* Adds/keeps an ownerReference {apiVersion, kind, name, uid} (controller when asked) in
 * obj's metadata; true when it changed. */
bool capi_set_owner(cJSON *obj,
                    const char *api_version,
                    const char *kind,
                    const char *name,
                    const char *uid,
                    bool controller);
/* Sets metadata.labels[key] = value; true when it changed. */
bool capi_set_label(cJSON *obj, const char *key, const char *value);
bool capi_has_finalizer(const cJSON *obj, const char *f);
void capi_add_finalizer(cJSON *obj, const char *f);
void capi_remove_finalizer(cJSON *obj, const char *f);
/* metadata.deletionTimestamp present. */
bool capi_deleting(const cJSON *obj);
/* The Cluster is paused (spec.paused, or the cluster.x-k8s.io/paused annotation): as CAPI's
 * controllers, capi-sim then leaves it and everything of it alone (clusterctl move). */
bool capi_paused(const cJSON *cluster);
/* "<prefix>-<5 random lowercase alnum>" (malloc'd). */
char *capi_random_name(struct capi *s, const char *prefix);
/* Writes what changed between before and after (patch_helper); logs nothing. */
MUST_CHECK int capi_write(struct capi_worker *w,
                          const struct kube_resource *r,
                          const cJSON *before,
                          const cJSON *after);
/* Create / delete that treat "already exists" / "already gone" as success. */
MUST_CHECK int capi_create(struct kube_client *c,
                           const struct kube_resource *r,
                           const char *ns,
                           const cJSON *obj,
                           cJSON **ret);
MUST_CHECK int capi_delete(struct kube_client *c,
                           const struct kube_resource *r,
                           const char *ns,
                           const char *name);
/* status.<v1beta1> or status.initialization.<v1beta2> is true (either contract). */
bool capi_status_true(const cJSON *o, const char *v1beta1, const char *v1beta2);
/* Sets the contract's field: status.initialization.<v1beta2> in v1beta2, status.<v1beta1>
 * in v1beta1 (which, as CAPI 1.10 with its v1beta2 backports, sets both). */
void capi_status_set(cJSON *status, const char *v1beta1, const char *v1beta2, bool value);
/* The cluster a KCP/MD/Machine belongs to (label, spec.clusterName, owner Cluster). */
const char *capi_cluster_of(const cJSON *o);
