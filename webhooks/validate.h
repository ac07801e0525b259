#pragma once
/*
 * validate: the per-kind admission rules behind webhook_default() / webhook_validate().
 * Each kind is described by a struct kind_ops (its name, and the value rules, the
 * reference's immutability rules and defaulting of its spec type); kinds.c runs the common
 * flow (decoding with the kind's schema codec, CAPI exemptions, decoder type errors,
 * ratcheting, template immutability). Private to the webhooks library; every function is
 * pure and reentrant.
 */

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "schema.h"

struct admission_response;
struct field_errors;
struct maas_inventory;
struct maas_inventory_snapshot;

/* One decoded object of any Maas kind. */
union webhook_obj {
        struct maas_cluster cluster;
        struct maas_cluster_template cluster_template;
        struct maas_machine machine;
        struct maas_machine_template machine_template;
        struct maas_remediation remediation;
        struct maas_remediation_template remediation_template;
};

/* What the MAAS checks of a spec read and write. */
struct maas_check {
        const char *path; /* of the spec: "spec" or "spec.template.spec" */
        const struct maas_inventory_snapshot *s;
        struct field_errors *fe;         /* denials */
        struct admission_response *warn; /* warnings; may be NULL */
        bool miss;      /* set when a name is not in s, or nothing in s fits: worth a fresh read */
        bool want_pods; /* the check needs MAAS's VM hosts, which s does not list */
};

/* The rules of one spec type (MaasClusterSpec or MaasMachineSpec), shared by a kind and its
 * template; spec points at a value of that type. */
struct spec_ops {
        /* Value rules of the spec at path into fe; warnings into warn (may be NULL). */
        void (*check)(const void *spec,
                      const char *path,
                      struct field_errors *fe,
                      struct admission_response *warn);
        /* The reference's update rules: the first violation's message (malloc'd) or NULL;
         * what names the kind in it. */
        char *(*immutable)(const void *old, const void *cur, const char *what);
        /* Appends JSON Patch operations for the defaults of spec (the spec object at JSON
         * Pointer pointer) to patch. */
        void (*defaults)(const cJSON *spec, const char *pointer, cJSON *patch);
        /* Checks against MAAS (validate_maas.c); NULL for a kind without any. */
        void (*maas_check)(const void *spec, struct maas_check *c);
        /* True when every field maas_check reads is equal in a and b. */
        bool (*maas_same)(const void *a, const void *b);
};

extern const struct spec_ops spec_ops_cluster;
extern const struct spec_ops spec_ops_machine;
/* MaasMachineTemplate: the MaasMachine rules, and a warning for staticIP. */
extern const struct spec_ops spec_ops_machine_template;
/* MaasRemediation and MaasRemediationTemplate (validate_remediation.c). */
extern const struct spec_ops spec_ops_remediation;

struct kind_ops {
        const char *kind; /* "MaasMachine" */
        /* The kind in the reference's update messages ("machine template"); NULL when the
         * reference has no update rules for it (MaasClusterTemplate). */
        const char *what;
        bool is_template; /* spec.template.spec is immutable (kubernetes.md 3.4) */
        const struct spec_ops *spec;
        /* Update rules that read more than the spec: the stored object's status (in
         * old_json: the decoded objects carry none) and metadata; into fe. NULL when the
         * kind has none. */
        void (*update)(const cJSON *old_json,
                       const union webhook_obj *old,
                       const union webhook_obj *cur,
                       struct field_errors *fe);
};

/* The ops of a kind name, or NULL. */
const struct kind_ops *kind_ops_find(const char *kind);

/* MaasMachine spec rules at path (e.g. "spec.template.spec"); the "any machine will do"
 * warning goes to warn (may be NULL). */
void validate_machine_spec(const struct maas_machine_spec *s,
                           const char *path,
                           struct field_errors *fe,
                           struct admission_response *warn);
/* validate_deploy_options.c: hweKernel, architecture, excludeTags and storageLayout at path
 * (docs/deploy-options.md); the fields capmaas does not act on (parent off an LXD VM),
 * denied; on a MaasMachine UPDATE, the deploy and allocation options are immutable. */
void validate_deploy_options(const struct maas_machine_spec *s,
                             const char *path,
                             struct field_errors *fe);
void validate_machine_unused(const struct maas_machine_spec *s,
                             const char *path,
                             struct field_errors *fe);
void deploy_options_update(const struct maas_machine_spec *old,
                           const struct maas_machine_spec *cur,
                           struct field_errors *fe);
/* MaasCluster spec rules at path. */
void validate_cluster_spec(const struct maas_cluster_spec *s,
                           const char *path,
                           struct field_errors *fe);
/* The reference's image / min cpu / min memory checks, in its order. what is "machine" or
 * "machine template". Returns the first message (malloc'd) or NULL. */
/* MaasMachine: spec.providerID may not change or go once the old object is provisioned
 * (Cluster API copied it into the Machine); before that capmaas replaces hosts freely, and
 * an object being deleted is exempt. */
void machine_provider_id_update(const cJSON *old_json,
                                const union webhook_obj *old,
                                const union webhook_obj *cur,
                                struct field_errors *fe);
char *machine_spec_immutable(const struct maas_machine_spec *old,
                             const struct maas_machine_spec *cur,
                             const char *what);

/* MaasMachine: the update rules that are not the reference's (spec.providerID once
 * provisioned, staticIP and addressesFromPools always). */
void machine_update(const cJSON *old_json,
                    const union webhook_obj *old,
                    const union webhook_obj *cur,
                    struct field_errors *fe);

/* ---- static addresses (validate_static_ip.c, docs/static-ips.md) ---- */

/* staticIP at path.staticIP: ip and cidr required; cidr a network; ip inside it and not its
 * network or broadcast address; gateway an address inside it, not ip; nameservers
 * addresses; interface a Linux interface name. */
void validate_static_ip(const struct schema_static_ip *s,
                        const char *path,
                        struct field_errors *fe);
/* addressesFromPools at path.addressesFromPools: apiGroup, kind and name each required and
 * well formed; at most 8; a warning when more than one (only the first is used). */
void validate_pool_refs(const struct schema_pool_refs *r,
                        const char *path,
                        struct field_errors *fe,
                        struct admission_response *warn);
/* Both of the above for a MaasMachine spec, and not both set. */
void validate_machine_addresses(const struct maas_machine_spec *s,
                                const char *path,
                                struct field_errors *fe,
                                struct admission_response *warn);
/* A MaasMachineTemplate with staticIP: allowed with a warning (every machine made from it
 * asks for the same address; docs/static-ips.md says when that works). */
void validate_template_static_ip(const struct maas_machine_spec *s,
                                 const char *path,
                                 struct admission_response *warn);
/* spec.release.erase none, quick or secure, and not secure with nodeReuse
 * (validate_reuse.c; docs/host-reuse.md). */
void validate_machine_reuse(const struct maas_machine_spec *s,
                            const char *path,
                            struct field_errors *fe);
/* A template with nodeReuse: the warning that reuse needs maxSurge: 0. */
void validate_template_reuse(const struct maas_machine_spec *s,
                             const char *path,
                             struct admission_response *warn);
/* dnsRecordAddresses at path.dnsRecordAddresses: cidr required, a network; interface a
 * Linux interface name. */
void validate_dns_record_addresses(const struct schema_dns_record_addresses *d,
                                   const char *path,
                                   struct field_errors *fe);
/* staticIP and addressesFromPools may not change on a MaasMachine (added, removed or
 * edited). */
void machine_addresses_update(const struct maas_machine_spec *old,
                              const struct maas_machine_spec *cur,
                              struct field_errors *fe);
/* MAAS checks of staticIP: its cidr is a MAAS subnet (denied listing them; skipped when the
 * snapshot knows no subnets), and a warning when another machine holds its ip. False when
 * the subnet was missing (worth a fresh read). */
bool maas_check_static_ip(const struct maas_machine_spec *sp, struct maas_check *c);
/* staticIP equal in a and b. */
bool maas_static_ip_same(const struct maas_machine_spec *a, const struct maas_machine_spec *b);

/* MaasRemediation spec rules at path: strategy.type Reboot, strategy.retryLimit 0..10,
 * strategy.timeout a positive duration up to 24h. */
void validate_remediation_spec(const struct maas_remediation_spec *s,
                               const char *path,
                               struct field_errors *fe);
/* Defaulting of a MaasRemediation spec: strategy {type Reboot, retryLimit 1, timeout 5m0s},
 * each member added only when absent. */
void defaults_remediation_spec(const cJSON *spec, const char *pointer, cJSON *patch);
/* Defaulting of a MaasMachine spec: duplicate tags removed, first occurrence kept. */
void defaults_machine_spec(const cJSON *spec, const char *pointer, cJSON *patch);
/* Defaulting of a MaasCluster spec: controlPlaneEndpoint.port 6443 when a host is set
 * without a port. */
void defaults_cluster_spec(const cJSON *spec, const char *pointer, cJSON *patch);

/* MAAS checks of a MaasMachine spec: pool, zone, tags and image exist; some machine with
 * those could satisfy minCPU / minMemory (unless systemID pins one); a warning when the
 * machines that fit are all in use. */
void maas_check_machine_spec(const struct maas_machine_spec *sp, struct maas_check *c);
/* validate_maas_options.c: excludeTags, architecture, hweKernel and minDiskSize against the
 * inventory (docs/deploy-options.md); false when a name is not in it. */
bool maas_check_deploy_options(const struct maas_machine_spec *sp, struct maas_check *c);
/* validate_lxd.c: spec.lxd's value rules (docs/lxd.md), and its MAAS checks against the
 * snapshot's VM hosts (want_pods when it lists none yet). */
void validate_machine_lxd(const struct maas_machine_spec *s,
                          const char *path,
                          struct field_errors *fe);
void maas_check_machine_lxd(const struct maas_machine_spec *s, struct maas_check *c);
/* MAAS checks of a MaasCluster spec: dnsDomain is a MAAS domain, every failureDomains
 * entry a MAAS zone. */
void maas_check_cluster_spec(const struct maas_cluster_spec *sp, struct maas_check *c);

/* ---- spec.endpoint (validate_endpoint.c, docs/endpoints.md) ---- */

/* Value rules of spec.endpoint at path.endpoint. */
void validate_endpoint_spec(const struct maas_cluster_spec *s,
                            const char *path,
                            struct field_errors *fe);
/* MaasCluster update: spec.endpoint.type (and a VIP's address and subnet) may not change
 * once the old object has spec.controlPlaneEndpoint.host. */
void cluster_update(const cJSON *old_json,
                    const union webhook_obj *old,
                    const union webhook_obj *cur,
                    struct field_errors *fe);
/* A VIP's address or subnet against the snapshot. */
void maas_check_endpoint(const struct maas_cluster_spec *sp, struct maas_check *c);
/* True when the fields maas_check_endpoint reads are equal. */
bool maas_endpoint_same(const struct maas_cluster_spec *a, const struct maas_cluster_spec *b);
/* True when the fields the MAAS checks read are equal. */
bool maas_machine_spec_same(const struct maas_machine_spec *a, const struct maas_machine_spec *b);
bool maas_cluster_spec_same(const struct maas_cluster_spec *a, const struct maas_cluster_spec *b);

/* A spec under review at path, and the stored object's (NULL on CREATE). */
struct spec_pair {
        const char *path;
        const void *cur;
        const void *old;
};

/* The MAAS step of validation of sp with so's checks: skipped on an UPDATE that changes
 * nothing it reads; with no usable inventory a warning says why; denials the old object
 * already had are dropped. */
void maas_checks_run(const struct spec_ops *so,
                     const struct spec_pair *sp,
                     struct maas_inventory *inv,
                     struct field_errors *fe,
                     struct admission_response *resp);
