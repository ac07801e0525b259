#pragma once
/*
 * schema: the CRD types of infrastructure.cluster.x-k8s.io/v1beta1 (MaasCluster,
 * MaasMachine, MaasMachineTemplate, MaasClusterTemplate, MaasRemediation,
 * MaasRemediationTemplate) as C structs, and their JSON codec.
 * Field semantics: upstream-capmaas.md section 1; CAPI contracts: kubernetes.md section 4.
 *
 * Presence convention (absent is never confused with zero):
 *  - strings and nested objects are pointers: NULL = absent;
 *  - int64 and bool scalars have a has_<field> flag next to them;
 *  - lists and maps (struct schema_strv, schema_strmap, schema_conditions, ...) have a
 *    `present` flag: an absent list and an empty list "[]" are different.
 * A JSON null counts as absent (as in Kubernetes).
 *
 * Decode only checks types and shape (every error with its field path, all errors of an
 * object collected); required fields and value rules are the webhooks' job. Decoded
 * objects keep a deep copy of their JSON (`raw`). Encode starts from a copy of raw and
 * overwrites or removes the known fields, so unknown fields (managedFields, future CAPI
 * fields, unknown keys inside spec, status, conditions, ...) survive a decode/encode round
 * trip. Entries of object lists (conditions, failureDomains, addresses, ownerReferences) are
 * matched to their raw entry by key (type, name, uid; addresses by index) to keep their
 * unknown fields.
 *
 * Objects as the reference provider wrote them (v0.7 and v0.8: CAPI v1beta1 shapes) decode
 * into the current structs, and encode writes the current shape, so the next write of such
 * an object migrates it (upstream-capmaas.md 3.1): MaasCluster status.failureDomains as a
 * map {"<zone>": {"controlPlane": true}} reads as the list [{"name": "<zone>", ...}] (an
 * empty map, which is what an API server serving the current CRD prunes the map to, as
 * []); a v1beta1 condition's severity is dropped and a missing reason reads as
 * SCHEMA_REASON_NO_REASON_REPORTED; a status with ready true and no
 * initialization.provisioned (the reference sets both together since v0.9) reads as
 * provisioned.
 *
 * Ownership: every pointer in these structs is owned by the struct (one owner per
 * allocation); release with the kind's _release(). Strings set by callers must be
 * malloc'ed (xstrdup). Not thread-safe; a value has one owner thread.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "json.h"

/* ---- group, kinds, well-known names (upstream-capmaas.md 1.1, 1.2, 1.3, 1.7) ---- */

#define SCHEMA_GROUP                   "infrastructure.cluster.x-k8s.io"
#define SCHEMA_VERSION                 "v1beta1"
#define SCHEMA_API_VERSION             SCHEMA_GROUP "/" SCHEMA_VERSION
#define SCHEMA_KIND_CLUSTER            "MaasCluster"
#define SCHEMA_KIND_MACHINE            "MaasMachine"
#define SCHEMA_KIND_MACHINE_TEMPLATE   "MaasMachineTemplate"
#define SCHEMA_KIND_CLUSTER_TEMPLATE   "MaasClusterTemplate"
#define SCHEMA_PLURAL_CLUSTER          "maasclusters"
#define SCHEMA_PLURAL_MACHINE          "maasmachines"
#define SCHEMA_PLURAL_MACHINE_TEMPLATE "maasmachinetemplates"
#define SCHEMA_PLURAL_CLUSTER_TEMPLATE "maasclustertemplates"

#define SCHEMA_FINALIZER_CLUSTER         "maascluster.infrastructure.cluster.x-k8s.io"
#define SCHEMA_FINALIZER_MACHINE         "maasmachine.infrastructure.cluster.x-k8s.io"
#define SCHEMA_FINALIZER_HOST_EVACUATION "maas.lxd.io/host-evacuation"

#define SCHEMA_LABEL_CLUSTER_NAME           "cluster.x-k8s.io/cluster-name"
#define SCHEMA_LABEL_CONTROL_PLANE          "cluster.x-k8s.io/control-plane"
#define SCHEMA_LABEL_WATCH_FILTER           "cluster.x-k8s.io/watch-filter"
#define SCHEMA_ANNOTATION_PAUSED            "cluster.x-k8s.io/paused"
#define SCHEMA_ANNOTATION_MANAGED_BY        "cluster.x-k8s.io/managed-by"
#define SCHEMA_LABEL_API_SERVER_READY       "cluster-api-maas/api-server-ready"
#define SCHEMA_LABEL_LXD_HOST_INITIALIZED   "lxdhost.cluster.com/initialized"
#define SCHEMA_ANNOTATION_VM_NAME           "maas.spectrocloud.com/vm-name"
#define SCHEMA_ANNOTATION_EVACUATION_DONE   "maas.lxd.io/evacuation-completed"
#define SCHEMA_SECRET_BOOTSTRAP_CREDENTIALS "capmaas-manager-bootstrap-credentials"

/* Condition status values, types and reasons (upstream-capmaas.md 1.6, kubernetes.md 4.1). */
#define SCHEMA_CONDITION_TRUE    "True"
#define SCHEMA_CONDITION_FALSE   "False"
#define SCHEMA_CONDITION_UNKNOWN "Unknown"

#define SCHEMA_COND_READY                "Ready"
#define SCHEMA_COND_PAUSED               "Paused"
#define SCHEMA_COND_MACHINE_DEPLOYED     "MachineDeployed"
#define SCHEMA_COND_DNS_ATTACHED         "DNSAttached"
#define SCHEMA_COND_LOAD_BALANCER_READY  "LoadBalancerReady"
#define SCHEMA_COND_API_SERVER_AVAILABLE "APIServerAvailable"
#define SCHEMA_COND_LXD_READY            "LXDReady"
#define SCHEMA_COND_STATIC_IP_APPLIED    "StaticIPApplied"

#define SCHEMA_REASON_MACHINE_DEPLOYED           "MachineDeployed"
#define SCHEMA_REASON_WAITING_FOR_CLUSTER_INFRA  "WaitingForClusterInfrastructure"
#define SCHEMA_REASON_WAITING_FOR_BOOTSTRAP_DATA "WaitingForBootstrapData"
#define SCHEMA_REASON_MACHINE_DEPLOY_STARTED     "MachineDeployStartedReason"
#define SCHEMA_REASON_MACHINE_DEPLOY_FAILED      "MachineDeployFailed"
#define SCHEMA_REASON_MACHINE_DEPLOYING          "MachineDeploying"
#define SCHEMA_REASON_MACHINE_TERMINATED         "MachineTerminatedReason"
#define SCHEMA_REASON_MACHINE_POWERED_OFF        "MachinePoweredOff"
#define SCHEMA_REASON_MACHINE_STATE_UNDEFINED    "MachineStateUndefined"
#define SCHEMA_REASON_MACHINE_NOT_FOUND          "MachineNotFound"
#define SCHEMA_REASON_DELETED                    "Deleted"
#define SCHEMA_REASON_DNS_ATTACHED               "DNSAttached"
#define SCHEMA_REASON_DNS_ATTACH_PENDING         "DNSAttachPending"
#define SCHEMA_REASON_DNS_DETACH_PENDING         "DNSDetachPending"
#define SCHEMA_REASON_LOAD_BALANCER_READY        "LoadBalancerReady"
#define SCHEMA_REASON_LOAD_BALANCER_FAILED       "LoadBalancerFailed"
#define SCHEMA_REASON_WAIT_FOR_DNS_NAME          "WaitForDNSName"
#define SCHEMA_REASON_API_SERVER_AVAILABLE       "APIServerAvailable"
#define SCHEMA_REASON_API_SERVER_NOT_READY       "APIServerNotReady"
#define SCHEMA_REASON_LXD_READY                  "LXDReady"
#define SCHEMA_REASON_LXD_FAILED                 "LXDFailed"
#define SCHEMA_REASON_LXD_SETUP_PENDING          "LXDSetupPending"
#define SCHEMA_REASON_STATIC_IP_APPLIED          "StaticIPApplied"
#define SCHEMA_REASON_STATIC_IP_FAILED           "StaticIPFailed"
#define SCHEMA_REASON_STATIC_IP_PENDING          "StaticIPPending"
#define SCHEMA_REASON_PAUSED                     "Paused"
#define SCHEMA_REASON_NOT_PAUSED                 "NotPaused"
/* What a condition without a reason (CAPI v1beta1 allowed one) reads as, as in CAPI. */
#define SCHEMA_REASON_NO_REASON_REPORTED         "NoReasonReported"
/* addressesFromPools: the MaasMachine's IPAddressClaim (reconcile/maasmachine_ipam.c). */
#define SCHEMA_COND_IPADDRESS_CLAIMED            "IPAddressClaimed"
#define SCHEMA_REASON_WAITING_FOR_IP_ADDRESS     "WaitingForIPAddress"
#define SCHEMA_REASON_IPADDRESS_CLAIM_FAILED     "IPAddressClaimFailed"
#define SCHEMA_REASON_IPADDRESS_CLAIMED          "IPAddressClaimed"

/* ---- building blocks ---- */

struct schema_strv {
        char **items; /* owned, each owned */
        size_t n;
        bool present;
};

struct schema_strmap_entry {
        char *key;   /* owned */
        char *value; /* owned */
};

struct schema_strmap {
        struct schema_strmap_entry *items; /* owned; input order */
        size_t n;
        bool present;
};

/* metav1.Condition. lastTransitionTime is kept as the RFC 3339 text. */
struct schema_condition {
        char *type;
        char *status; /* "True", "False", "Unknown" */
        int64_t observed_generation;
        bool has_observed_generation;
        char *last_transition_time;
        char *reason;
        char *message;
};

struct schema_conditions {
        struct schema_condition *items;
        size_t n;
        bool present;
};

struct schema_owner_ref {
        char *api_version;
        char *kind;
        char *name;
        char *uid;
        bool controller, has_controller;
        bool block_owner_deletion, has_block_owner_deletion;
};

struct schema_owner_refs {
        struct schema_owner_ref *items;
        size_t n;
        bool present;
};

struct schema_meta {
        char *name;
        char *namespace;
        char *uid;
        char *resource_version;
        int64_t generation;
        bool has_generation;
        char *creation_timestamp;
        char *deletion_timestamp;
        struct schema_strmap labels;
        struct schema_strmap annotations;
        struct schema_strv finalizers;
        struct schema_owner_refs owner_refs;
};

/* ---- MaasCluster ---- */

struct schema_api_endpoint {
        char *host;
        int64_t port; /* int32 range */
        bool has_port;
};

struct maas_lxd_config {
        bool enabled, has_enabled;
        char *resource_pool;
        char *zone;
        char *storage_backend;
        char *storage_size;
        char *nic_type;
        char *nic_parent;
        char *network_bridge;
        bool skip_network_update, has_skip_network_update;
};

/* spec.dnsRecordAddresses: which control-plane addresses the API-server DNS record holds
 * (docs/static-ips.md). cidr: only addresses inside it; interface (NULL = any): only
 * addresses MAAS links on the interface of that name. Absent = the default rule. */
struct schema_dns_record_addresses {
        char *cidr;
        char *interface;
};

/* spec.identityRef: the Secret (in the cluster's namespace) holding the MAAS endpoint, apiKey
 * and optional caBundle this cluster's machines use (docs/credentials.md). kind: "Secret". */
struct schema_identity_ref {
        char *kind;
        char *name;
};

/* spec.endpoint: where the API endpoint comes from (docs/endpoints.md). type NULL or "DNS":
 * the MAAS DNS record (the default); "VIP": an address MAAS reserves for the cluster
 * (address, else one MAAS picks from subnet), held by the control planes (kube-vip);
 * "External": an endpoint the user runs, set in controlPlaneEndpoint (nothing in MAAS).
 * dnsRecord (VIP with dnsDomain): a MAAS DNS record also names the address. */
struct schema_endpoint {
        char *type;
        char *address;
        char *subnet;
        bool dns_record, has_dns_record;
};

#define SCHEMA_ENDPOINT_DNS      "DNS"
#define SCHEMA_ENDPOINT_VIP      "VIP"
#define SCHEMA_ENDPOINT_EXTERNAL "External"

struct maas_cluster_spec {
        char *dns_domain;
        struct schema_endpoint *endpoint;
        struct schema_api_endpoint *control_plane_endpoint;
        struct schema_strv failure_domains;
        struct maas_lxd_config *lxd_config;
        struct schema_dns_record_addresses *dns_record_addresses;
        struct schema_identity_ref *identity_ref; /* NULL = the process-wide MAAS */
};

/* status.failureDomains entry (v1beta2 list form). */
struct schema_failure_domain {
        char *name;
        bool control_plane, has_control_plane;
        struct schema_strmap attributes;
};

struct schema_failure_domains {
        struct schema_failure_domain *items;
        size_t n;
        bool present;
};

struct maas_cluster_network {
        char *dns_name;
};

/* When present, encode always writes ready and initialization.provisioned (false when
 * has_ is unset), as both CAPI contracts read them. */
struct maas_cluster_status {
        bool present;
        bool ready, has_ready;
        bool provisioned, has_provisioned; /* initialization.provisioned */
        struct maas_cluster_network *network;
        struct schema_failure_domains failure_domains;
        struct schema_conditions conditions;
};

struct maas_cluster {
        struct schema_meta meta;
        struct maas_cluster_spec spec;
        struct maas_cluster_status status;
        cJSON *raw; /* owned copy of the decoded JSON; NULL for a new object */
};

/* spec.template.spec is a MaasClusterSpec; spec.template.metadata is kept in raw. */
struct maas_cluster_template {
        struct schema_meta meta;
        struct maas_cluster_spec spec;
        cJSON *raw;
};

/* ---- MaasMachine ---- */

struct maas_vm_config {
        int64_t disk_size;
        bool has_disk_size;
        char *storage_pool;
        char *network;
        struct schema_strmap interface_link_modes;
        bool auto_start, has_auto_start;
};

struct maas_machine_lxd {
        bool enabled, has_enabled;
        struct maas_vm_config *vm_config;
};

/* spec.staticIP: a fixed address applied in MAAS between allocate and deploy
 * (docs/static-ips.md). ip and cidr are required (the webhook checks it); gateway NULL =
 * the subnet's; nameservers absent = the subnet's; interface NULL = the boot interface.
 * Also the seam between the IPAM step (an answered IPAddress becomes one) and the MAAS
 * network step that applies it. */
struct schema_static_ip {
        char *ip;
        char *cidr;
        char *gateway;
        struct schema_strv nameservers;
        char *interface;
};

/* spec.addressesFromPools entry: a Cluster API IPAM pool (TypedLocalObjectReference with
 * the group in apiGroup). Only the first entry is used. */
struct schema_pool_ref {
        char *api_group;
        char *kind;
        char *name;
};

struct schema_pool_refs {
        struct schema_pool_ref *items;
        size_t n;
        bool present;
};

/* spec.storageLayout: the MAAS storage layout applied to the machine before it is allocated
 * (set_storage_layout; docs/deploy-options.md). type is flat, lvm, bcache or blank; the
 * sizes are MAAS's (bytes with an optional K/M/G/T/P/E suffix, or a percentage of the boot
 * disk); vg_name, lv_name, lv_size are lvm's, the cache_* bcache's. NULL = MAAS's default. */
struct schema_storage_layout {
        char *type;
        char *boot_size;
        char *root_size;
        char *vg_name;
        char *lv_name;
        char *lv_size;
        char *cache_mode;
        char *cache_size;
        bool cache_no_part, has_cache_no_part;
};

/* spec.release: how the host goes back to MAAS (docs/host-reuse.md). erase NULL = the
 * --release-erase flag; else "none", "quick" or "secure" (the webhook checks it). */
struct maas_machine_release {
        char *erase;
};

struct maas_machine_spec {
        char *failure_domain;
        char *system_id;
        char *parent;
        char *provider_id;
        char *resource_pool;
        int64_t min_cpu;
        bool has_min_cpu;
        int64_t min_memory; /* MB */
        bool has_min_memory;
        int64_t min_disk_size; /* GB */
        bool has_min_disk_size;
        struct schema_strv tags;
        char *image;
        bool deploy_in_memory, has_deploy_in_memory;
        struct maas_machine_lxd *lxd;
        struct schema_static_ip *static_ip;
        struct schema_pool_refs addresses_from_pools;
        /* deploy and allocation options (docs/deploy-options.md) */
        char *hwe_kernel;                /* deploy hwe_kernel */
        char *architecture;              /* allocate arch */
        struct schema_strv exclude_tags; /* allocate not_tags */
        struct schema_storage_layout *storage_layout;
        /* host reuse (docs/host-reuse.md) */
        bool node_reuse, has_node_reuse;
        struct maas_machine_release *release;
};

struct schema_address {
        char *type; /* Hostname, ExternalIP, InternalIP, ExternalDNS, InternalDNS */
        char *address;
};

struct schema_addresses {
        struct schema_address *items;
        size_t n;
        bool present;
};

/* When present, encode always writes ready and initialization.provisioned. */
struct maas_machine_status {
        bool present;
        bool ready, has_ready;
        bool provisioned, has_provisioned; /* initialization.provisioned */
        char *machine_state;
        bool machine_powered, has_machine_powered;
        char *hostname;
        bool dns_attached, has_dns_attached;
        char *failure_domain; /* the MAAS zone the machine landed in (v1beta2 contract) */
        struct schema_addresses addresses;
        struct schema_conditions conditions;
        char *failure_reason;
        char *failure_message;
};

struct maas_machine {
        struct schema_meta meta;
        struct maas_machine_spec spec;
        struct maas_machine_status status;
        cJSON *raw;
};

/* spec.template.spec is a MaasMachineSpec; spec.template.metadata is kept in raw. */
struct maas_machine_template {
        struct schema_meta meta;
        struct maas_machine_spec spec;
        cJSON *raw;
};

/* ---- MaasRemediation (CAPI external remediation; docs/remediation.md) ---- */

#define SCHEMA_KIND_REMEDIATION            "MaasRemediation"
#define SCHEMA_KIND_REMEDIATION_TEMPLATE   "MaasRemediationTemplate"
#define SCHEMA_PLURAL_REMEDIATION          "maasremediations"
#define SCHEMA_PLURAL_REMEDIATION_TEMPLATE "maasremediationtemplates"
#define SCHEMA_FINALIZER_REMEDIATION       "maasremediation.infrastructure.cluster.x-k8s.io"
/* spec.strategy.type: the only strategy. */
#define SCHEMA_REMEDIATION_REBOOT          "Reboot"
/* The defaults the mutating webhook writes (and the controller assumes when absent). */
#define SCHEMA_REMEDIATION_RETRY_LIMIT     1
#define SCHEMA_REMEDIATION_TIMEOUT         "5m0s"
/* status.phase: Metal3's names, and Succeeded once the Node is Ready again. */
#define SCHEMA_REMEDIATION_RUNNING         "Running"
#define SCHEMA_REMEDIATION_WAITING         "Waiting"
#define SCHEMA_REMEDIATION_SUCCEEDED       "Succeeded"
#define SCHEMA_REMEDIATION_DELETING        "Deleting machine"
#define SCHEMA_REMEDIATION_FAILED          "Failed"

/* spec.strategy (Metal3's RemediationStrategy shape). timeout is a Go duration ("5m"). */
struct maas_remediation_strategy {
        char *type;
        int64_t retry_limit; /* int32 range */
        bool has_retry_limit;
        char *timeout;
};

struct maas_remediation_spec {
        struct maas_remediation_strategy *strategy;
};

/* Not the common status prefix: a remediation has no ready or initialization; encode
 * writes only the fields below. */
struct maas_remediation_status {
        bool present;
        char *phase;
        int64_t retry_count; /* power cycles done */
        bool has_retry_count;
        char *last_remediated; /* RFC 3339: the last power-on */
        struct schema_conditions conditions;
};

struct maas_remediation {
        struct schema_meta meta;
        struct maas_remediation_spec spec;
        struct maas_remediation_status status;
        cJSON *raw;
};

/* spec.template.spec is a MaasRemediationSpec; spec.template.metadata is kept in raw. */
struct maas_remediation_template {
        struct schema_meta meta;
        struct maas_remediation_spec spec;
        cJSON *raw;
};

/*
 * ---- codec ----
 * _decode: obj must be the whole object (apiVersion, kind, metadata, spec, status). Every
 * type/shape error is appended to reterr (may be NULL) with its field path, e.g.
 * "spec.template.spec.minCPU: expected integer, got string"; CM_EINVAL when there was any.
 * *ret is written only on success (it needs no init) and must be released.
 * _encode: builds a new object (caller cJSON_Delete()s it); never fails except CM_EINVAL
 * for a NULL argument. apiVersion and kind are set when absent.
 * _init: an empty, absent-everything value. _release: frees everything, leaves it _init'ed.
 */
void maas_cluster_init(struct maas_cluster *c);
void maas_cluster_release(struct maas_cluster *c);
MUST_CHECK int maas_cluster_decode(const cJSON *obj,
                                   struct maas_cluster *ret,
                                   struct json_errors *reterr);
MUST_CHECK int maas_cluster_encode(const struct maas_cluster *c, cJSON **ret);

void maas_cluster_template_init(struct maas_cluster_template *t);
void maas_cluster_template_release(struct maas_cluster_template *t);
MUST_CHECK int maas_cluster_template_decode(const cJSON *obj,
                                            struct maas_cluster_template *ret,
                                            struct json_errors *reterr);
MUST_CHECK int maas_cluster_template_encode(const struct maas_cluster_template *t, cJSON **ret);

void maas_machine_init(struct maas_machine *m);
void maas_machine_release(struct maas_machine *m);
MUST_CHECK int maas_machine_decode(const cJSON *obj,
                                   struct maas_machine *ret,
                                   struct json_errors *reterr);
MUST_CHECK int maas_machine_encode(const struct maas_machine *m, cJSON **ret);

void maas_machine_template_init(struct maas_machine_template *t);
void maas_machine_template_release(struct maas_machine_template *t);
MUST_CHECK int maas_machine_template_decode(const cJSON *obj,
                                            struct maas_machine_template *ret,
                                            struct json_errors *reterr);
MUST_CHECK int maas_machine_template_encode(const struct maas_machine_template *t, cJSON **ret);

void maas_remediation_init(struct maas_remediation *r);
void maas_remediation_release(struct maas_remediation *r);
MUST_CHECK int maas_remediation_decode(const cJSON *obj,
                                       struct maas_remediation *ret,
                                       struct json_errors *reterr);
MUST_CHECK int maas_remediation_encode(const struct maas_remediation *r, cJSON **ret);

void maas_remediation_template_init(struct maas_remediation_template *t);
void maas_remediation_template_release(struct maas_remediation_template *t);
MUST_CHECK int maas_remediation_template_decode(const cJSON *obj,
                                                struct maas_remediation_template *ret,
                                                struct json_errors *reterr);
MUST_CHECK int maas_remediation_template_encode(const struct maas_remediation_template *t,
                                                cJSON **ret);

/*
 * Kind-generic codec, for code that treats the four kinds alike (the webhooks). obj, ret
 * and v are the struct of k's kind. schema_decode_view decodes as _decode does but without
 * the copy of the JSON, for readers that never encode (no deep copy of every reviewed
 * object); encoding such a value drops the fields the schema does not know.
 */
struct schema_kind_desc;
/* The codec of a kind name (SCHEMA_KIND_*), or NULL. */
const struct schema_kind_desc *schema_codec_find(const char *kind);
MUST_CHECK int schema_decode_view(const struct schema_kind_desc *k,
                                  const cJSON *obj,
                                  void *ret,
                                  struct json_errors *reterr);
/* schema_decode_view of the header, metadata and spec only: status is left zero whatever
 * obj holds there (admission judges the spec; the API server ignores status on the main
 * resource). */
MUST_CHECK int schema_decode_spec_view(const struct schema_kind_desc *k,
                                       const cJSON *obj,
                                       void *ret,
                                       struct json_errors *reterr);
void schema_release(const struct schema_kind_desc *k, void *v);
/* The spec of obj (a struct maas_cluster_spec, maas_machine_spec or maas_remediation_spec). */
const void *schema_spec(const struct schema_kind_desc *k, const void *obj);

/* Spec-level codec, for callers holding a spec at some other path. d's path must point at
 * the spec object (e.g. "spec.template.spec"); errors go through d. Decode into an _init'ed
 * or released spec. Encode writes the known fields into obj in place. */
MUST_CHECK int maas_machine_spec_decode(struct json_dec *d,
                                        const cJSON *obj,
                                        struct maas_machine_spec *ret);
void maas_machine_spec_encode(const struct maas_machine_spec *s, cJSON *obj);
void maas_machine_spec_release(struct maas_machine_spec *s);
MUST_CHECK int maas_cluster_spec_decode(struct json_dec *d,
                                        const cJSON *obj,
                                        struct maas_cluster_spec *ret);
void maas_cluster_spec_encode(const struct maas_cluster_spec *s, cJSON *obj);
void maas_cluster_spec_release(struct maas_cluster_spec *s);

/* ---- lists and maps ---- */

/* Appends a copy of s (sets present). */
void schema_strv_add(struct schema_strv *v, const char *s);
/* Index of s, or -1. */
long schema_strv_find(const struct schema_strv *v, const char *s);
/* Removes every copy of s; true if any was removed. */
bool schema_strv_remove(struct schema_strv *v, const char *s);
void schema_strv_release(struct schema_strv *v);
/* Value for key, or NULL. */
const char *schema_strmap_get(const struct schema_strmap *m, const char *key);
/* Sets key to a copy of value, replacing an existing value (sets present). */
void schema_strmap_set(struct schema_strmap *m, const char *key, const char *value);
bool schema_strmap_remove(struct schema_strmap *m, const char *key);
void schema_strmap_release(struct schema_strmap *m);

/* ---- conditions (CAPI util/conditions semantics, upstream-capmaas.md 1.6) ---- */

/* Borrowed input for schema_conditions_set(). message may be NULL (""). */
struct schema_condition_in {
        const char *type;
        const char *status;
        const char *reason;
        const char *message;
};

/* Condition of this type, or NULL. */
const struct schema_condition *schema_conditions_find(const struct schema_conditions *l,
                                                      const char *type);
/* True when the condition exists with status "True". */
bool schema_conditions_is_true(const struct schema_conditions *l, const char *type);
/*
 * Adds or updates a condition: observedGeneration = generation, lastTransitionTime = now
 * (RFC 3339 UTC, whole seconds) only when the condition is new or its status flips. Keeps
 * the list sorted: Available, Ready first; Deleting, Paused last; the rest alphabetical.
 * Returns true when anything changed (so a no-op reconcile can skip its write).
 */
bool schema_conditions_set(struct schema_conditions *l,
                           const struct schema_condition_in *in,
                           int64_t generation,
                           time_t now);
/* Removes the condition of this type; true if it existed. */
bool schema_conditions_remove(struct schema_conditions *l, const char *type);
void schema_conditions_release(struct schema_conditions *l);

/* ---- metadata helpers ---- */

bool schema_meta_has_finalizer(const struct schema_meta *m, const char *finalizer);
/* The ownerReference with controller=true, or NULL. */
const struct schema_owner_ref *schema_meta_controller(const struct schema_meta *m);
/* First ownerReference of this kind whose apiVersion's group is group, or NULL. */
const struct schema_owner_ref *schema_meta_owner(const struct schema_meta *m,
                                                 const char *group,
                                                 const char *kind);
void schema_meta_release(struct schema_meta *m);

/* ---- MAAS-specific helpers ---- */

/*
 * Splits an image as the reference's splitImage does: "<osystem>/<series>" splits at the
 * first '/' ("rhel/rocky-9" -> "rhel", "rocky-9"); no '/' -> "custom" and the whole string
 * ("" -> "custom", ""). Both results are new strings the caller frees.
 */
void schema_image_split(const char *image, char **ret_osystem, char **ret_series);

/* "maas:///<zone>/<system_id>". Caller frees. */
char *schema_provider_id_format(const char *zone, const char *system_id);
/*
 * Parses "maas:///<zone>/<system_id>": zone may be empty, must not contain '/'; system_id
 * must be non-empty without '/'. CM_EINVAL otherwise. Outputs (caller frees; either may be
 * NULL) are written only on success.
 */
MUST_CHECK int schema_provider_id_parse(const char *provider_id,
                                        char **ret_zone,
                                        char **ret_system_id);
/* The reference's lenient rule: if s matches ^[^:]+://.*[^/]$, the text after the last '/';
 * else NULL. Returns a pointer into s. */
const char *schema_provider_id_system_id(const char *s);

/* ---- field listing (tests/unit/webhooks/test_field_coverage.c) ---- */

/* Calls fn once for every member the schema knows in the spec of kind (SCHEMA_KIND_*), depth
 * first in table order, with its path relative to the spec: "storageLayout",
 * "storageLayout.type", list elements as "[]" ("addressesFromPools[].name"). Members an
 * older version wrote and the current shape drops (SF_DROP) are left out. Returns how many
 * members it reported, or -1 for an unknown kind. */
long schema_spec_fields(const char *kind, void (*fn)(void *ud, const char *path), void *ud);
