/*
 * schema_kinds: the type tables of the six kinds (upstream-capmaas.md 1.2-1.4; the
 * remediation kinds in Metal3's shape, docs/remediation.md; metadata and conditions from
 * Kubernetes), the generic top-level decode/encode (metadata, spec at
 * its path, status with ready and initialization.provisioned) and the public per-kind
 * wrappers of schema.h.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "schema_priv.h"
#include "xalloc.h"

/* A type and its index (a file-scope compound literal: static and writable). */
#define TYPE(T, tbl, key)                                                                 \
        {                                                                                 \
                sizeof(T), tbl, sizeof(tbl) / sizeof(tbl[0]), key, &(struct schema_index) \
                {                                                                         \
                        0                                                                 \
                }                                                                         \
        }

/* ---- metadata ---- */

static const struct schema_field owner_ref_fields[] = {
        SF_STR("apiVersion", struct schema_owner_ref, api_version),
        SF_STR("kind", struct schema_owner_ref, kind),
        SF_STR("name", struct schema_owner_ref, name),
        SF_STR("uid", struct schema_owner_ref, uid),
        SF_BOOL("controller", struct schema_owner_ref, controller),
        SF_BOOL("blockOwnerDeletion", struct schema_owner_ref, block_owner_deletion),
};
static const struct schema_type owner_ref_type =
        TYPE(struct schema_owner_ref, owner_ref_fields, "uid");

static const struct schema_field meta_fields[] = {
        SF_STR("name", struct schema_meta, name),
        SF_STR("namespace", struct schema_meta, namespace),
        SF_STR("uid", struct schema_meta, uid),
        SF_STR("resourceVersion", struct schema_meta, resource_version),
        SF_I64("generation", struct schema_meta, generation),
        SF_STR("creationTimestamp", struct schema_meta, creation_timestamp),
        SF_STR("deletionTimestamp", struct schema_meta, deletion_timestamp),
        SF_MAP("labels", struct schema_meta, labels),
        SF_MAP("annotations", struct schema_meta, annotations),
        SF_STRV("finalizers", struct schema_meta, finalizers),
        SF_LIST("ownerReferences", struct schema_meta, owner_refs, &owner_ref_type),
};
const struct schema_type schema_meta_type = TYPE(struct schema_meta, meta_fields, NULL);

static const struct schema_field condition_fields[] = {
        SF_STR("type", struct schema_condition, type),
        SF_STR("status", struct schema_condition, status),
        SF_I64("observedGeneration", struct schema_condition, observed_generation),
        SF_STR("lastTransitionTime", struct schema_condition, last_transition_time),
        SF_STR_OR("reason", struct schema_condition, reason, SCHEMA_REASON_NO_REASON_REPORTED),
        SF_STR("message", struct schema_condition, message),
        SF_DROP("severity"), /* v1beta1 conditions (reference v0.7, v0.8) */
};
const struct schema_type schema_conditions_elem_type =
        TYPE(struct schema_condition, condition_fields, "type");

/* ---- MaasCluster ---- */

static const struct schema_field endpoint_fields[] = {
        SF_STR("host", struct schema_api_endpoint, host),
        SF_I32("port", struct schema_api_endpoint, port),
};
static const struct schema_type endpoint_type =
        TYPE(struct schema_api_endpoint, endpoint_fields, NULL);

static const struct schema_field lxd_config_fields[] = {
        SF_BOOL("enabled", struct maas_lxd_config, enabled),
        SF_STR("resourcePool", struct maas_lxd_config, resource_pool),
        SF_STR("zone", struct maas_lxd_config, zone),
        SF_STR("storageBackend", struct maas_lxd_config, storage_backend),
        SF_STR("storageSize", struct maas_lxd_config, storage_size),
        SF_STR("nicType", struct maas_lxd_config, nic_type),
        SF_STR("nicParent", struct maas_lxd_config, nic_parent),
        SF_STR("networkBridge", struct maas_lxd_config, network_bridge),
        SF_BOOL("skipNetworkUpdate", struct maas_lxd_config, skip_network_update),
};
static const struct schema_type lxd_config_type =
        TYPE(struct maas_lxd_config, lxd_config_fields, NULL);

static const struct schema_field dns_record_addresses_fields[] = {
        SF_STR("cidr", struct schema_dns_record_addresses, cidr),
        SF_STR("interface", struct schema_dns_record_addresses, interface),
};
static const struct schema_type dns_record_addresses_type =
        TYPE(struct schema_dns_record_addresses, dns_record_addresses_fields, NULL);

static const struct schema_field identity_ref_fields[] = {
        SF_STR("kind", struct schema_identity_ref, kind),
        SF_STR("name", struct schema_identity_ref, name),
};
static const struct schema_type identity_ref_type =
        TYPE(struct schema_identity_ref, identity_ref_fields, NULL);

static const struct schema_field endpoint_source_fields[] = {
        SF_STR("type", struct schema_endpoint, type),
        SF_STR("address", struct schema_endpoint, address),
        SF_STR("subnet", struct schema_endpoint, subnet),
        SF_BOOL("dnsRecord", struct schema_endpoint, dns_record),
};
static const struct schema_type endpoint_source_type =
        TYPE(struct schema_endpoint, endpoint_source_fields, NULL);

static const struct schema_field cluster_spec_fields[] = {
        SF_STR("dnsDomain", struct maas_cluster_spec, dns_domain),
        SF_OBJ("endpoint", struct maas_cluster_spec, endpoint, &endpoint_source_type),
        SF_OBJ("controlPlaneEndpoint",
               struct maas_cluster_spec,
               control_plane_endpoint,
               &endpoint_type),
        SF_STRV("failureDomains", struct maas_cluster_spec, failure_domains),
        SF_OBJ("lxdConfig", struct maas_cluster_spec, lxd_config, &lxd_config_type),
        SF_OBJ("dnsRecordAddresses",
               struct maas_cluster_spec,
               dns_record_addresses,
               &dns_record_addresses_type),
        SF_OBJ("identityRef", struct maas_cluster_spec, identity_ref, &identity_ref_type),
};
static const struct schema_type cluster_spec_type =
        TYPE(struct maas_cluster_spec, cluster_spec_fields, NULL);

static const struct schema_field failure_domain_fields[] = {
        SF_STR("name", struct schema_failure_domain, name),
        SF_BOOL("controlPlane", struct schema_failure_domain, control_plane),
        SF_MAP("attributes", struct schema_failure_domain, attributes),
};
static const struct schema_type failure_domain_type =
        TYPE(struct schema_failure_domain, failure_domain_fields, "name");

static const struct schema_field network_fields[] = {
        SF_STR("dnsName", struct maas_cluster_network, dns_name),
};
static const struct schema_type network_type =
        TYPE(struct maas_cluster_network, network_fields, NULL);

static const struct schema_field cluster_status_fields[] = {
        SF_BOOL("ready", struct maas_cluster_status, ready),
        SF_OBJ("network", struct maas_cluster_status, network, &network_type),
        /* a map up to reference v0.8 (CAPI v1beta1 FailureDomains) */
        SF_LIST_OR_MAP("failureDomains",
                       struct maas_cluster_status,
                       failure_domains,
                       &failure_domain_type),
        SF_LIST("conditions", struct maas_cluster_status, conditions, &schema_conditions_elem_type),
};
static const struct schema_type cluster_status_type =
        TYPE(struct maas_cluster_status, cluster_status_fields, NULL);

/* ---- MaasMachine ---- */

static const struct schema_field vm_config_fields[] = {
        SF_I64("diskSize", struct maas_vm_config, disk_size),
        SF_STR("storagePool", struct maas_vm_config, storage_pool),
        SF_STR("network", struct maas_vm_config, network),
        SF_MAP("interfaceLinkModes", struct maas_vm_config, interface_link_modes),
        SF_BOOL("autoStart", struct maas_vm_config, auto_start),
};
static const struct schema_type vm_config_type =
        TYPE(struct maas_vm_config, vm_config_fields, NULL);

static const struct schema_field machine_lxd_fields[] = {
        SF_BOOL("enabled", struct maas_machine_lxd, enabled),
        SF_OBJ("vmConfig", struct maas_machine_lxd, vm_config, &vm_config_type),
};
static const struct schema_type machine_lxd_type =
        TYPE(struct maas_machine_lxd, machine_lxd_fields, NULL);

static const struct schema_field static_ip_fields[] = {
        SF_STR("ip", struct schema_static_ip, ip),
        SF_STR("cidr", struct schema_static_ip, cidr),
        SF_STR("gateway", struct schema_static_ip, gateway),
        SF_STRV("nameservers", struct schema_static_ip, nameservers),
        SF_STR("interface", struct schema_static_ip, interface),
};
static const struct schema_type static_ip_type =
        TYPE(struct schema_static_ip, static_ip_fields, NULL);

static const struct schema_field pool_ref_fields[] = {
        SF_STR("apiGroup", struct schema_pool_ref, api_group),
        SF_STR("kind", struct schema_pool_ref, kind),
        SF_STR("name", struct schema_pool_ref, name),
};
static const struct schema_type pool_ref_type = TYPE(struct schema_pool_ref, pool_ref_fields, NULL);

static const struct schema_field storage_layout_fields[] = {
        SF_STR("type", struct schema_storage_layout, type),
        SF_STR("bootSize", struct schema_storage_layout, boot_size),
        SF_STR("rootSize", struct schema_storage_layout, root_size),
        SF_STR("vgName", struct schema_storage_layout, vg_name),
        SF_STR("lvName", struct schema_storage_layout, lv_name),
        SF_STR("lvSize", struct schema_storage_layout, lv_size),
        SF_STR("cacheMode", struct schema_storage_layout, cache_mode),
        SF_STR("cacheSize", struct schema_storage_layout, cache_size),
        SF_BOOL("cacheNoPart", struct schema_storage_layout, cache_no_part),
};
static const struct schema_type storage_layout_type =
        TYPE(struct schema_storage_layout, storage_layout_fields, NULL);

static const struct schema_field machine_release_fields[] = {
        SF_STR("erase", struct maas_machine_release, erase),
};
static const struct schema_type machine_release_type =
        TYPE(struct maas_machine_release, machine_release_fields, NULL);

static const struct schema_field machine_spec_fields[] = {
        SF_STR("failureDomain", struct maas_machine_spec, failure_domain),
        SF_STR("systemID", struct maas_machine_spec, system_id),
        SF_STR("parent", struct maas_machine_spec, parent),
        SF_STR("providerID", struct maas_machine_spec, provider_id),
        SF_STR("resourcePool", struct maas_machine_spec, resource_pool),
        SF_I64("minCPU", struct maas_machine_spec, min_cpu),
        SF_I64("minMemory", struct maas_machine_spec, min_memory),
        SF_I64("minDiskSize", struct maas_machine_spec, min_disk_size),
        SF_STRV("tags", struct maas_machine_spec, tags),
        SF_STR("image", struct maas_machine_spec, image),
        SF_BOOL("deployInMemory", struct maas_machine_spec, deploy_in_memory),
        SF_OBJ("lxd", struct maas_machine_spec, lxd, &machine_lxd_type),
        SF_OBJ("staticIP", struct maas_machine_spec, static_ip, &static_ip_type),
        SF_LIST("addressesFromPools",
                struct maas_machine_spec,
                addresses_from_pools,
                &pool_ref_type),
        SF_STR("hweKernel", struct maas_machine_spec, hwe_kernel),
        SF_STR("architecture", struct maas_machine_spec, architecture),
        SF_STRV("excludeTags", struct maas_machine_spec, exclude_tags),
        SF_OBJ("storageLayout", struct maas_machine_spec, storage_layout, &storage_layout_type),
        SF_BOOL("nodeReuse", struct maas_machine_spec, node_reuse),
        SF_OBJ("release", struct maas_machine_spec, release, &machine_release_type),
};
static const struct schema_type machine_spec_type =
        TYPE(struct maas_machine_spec, machine_spec_fields, NULL);

static const struct schema_field address_fields[] = {
        SF_STR("type", struct schema_address, type),
        SF_STR("address", struct schema_address, address),
};
static const struct schema_type address_type = TYPE(struct schema_address, address_fields, NULL);

static const struct schema_field machine_status_fields[] = {
        SF_BOOL("ready", struct maas_machine_status, ready),
        SF_STR("machineState", struct maas_machine_status, machine_state),
        SF_BOOL("machinePowered", struct maas_machine_status, machine_powered),
        SF_STR("hostname", struct maas_machine_status, hostname),
        SF_BOOL("dnsAttached", struct maas_machine_status, dns_attached),
        SF_STR("failureDomain", struct maas_machine_status, failure_domain),
        SF_LIST("addresses", struct maas_machine_status, addresses, &address_type),
        SF_LIST("conditions", struct maas_machine_status, conditions, &schema_conditions_elem_type),
        SF_STR("failureReason", struct maas_machine_status, failure_reason),
        SF_STR("failureMessage", struct maas_machine_status, failure_message),
};
static const struct schema_type machine_status_type =
        TYPE(struct maas_machine_status, machine_status_fields, NULL);

/* ---- MaasRemediation ---- */

static const struct schema_field strategy_fields[] = {
        SF_STR("type", struct maas_remediation_strategy, type),
        SF_I32("retryLimit", struct maas_remediation_strategy, retry_limit),
        SF_STR("timeout", struct maas_remediation_strategy, timeout),
};
static const struct schema_type strategy_type =
        TYPE(struct maas_remediation_strategy, strategy_fields, NULL);

static const struct schema_field remediation_spec_fields[] = {
        SF_OBJ("strategy", struct maas_remediation_spec, strategy, &strategy_type),
};
static const struct schema_type remediation_spec_type =
        TYPE(struct maas_remediation_spec, remediation_spec_fields, NULL);

static const struct schema_field remediation_status_fields[] = {
        SF_STR("phase", struct maas_remediation_status, phase),
        SF_I32("retryCount", struct maas_remediation_status, retry_count),
        SF_STR("lastRemediated", struct maas_remediation_status, last_remediated),
        SF_LIST("conditions",
                struct maas_remediation_status,
                conditions,
                &schema_conditions_elem_type),
};
static const struct schema_type remediation_status_type =
        TYPE(struct maas_remediation_status, remediation_status_fields, NULL);

/* ---- the common status prefix: present, ready, provisioned ---- */

struct status_prefix {
        bool present;
        bool ready, has_ready;
        bool provisioned, has_provisioned;
};

#define SAME_OFFSET(T, m) \
        _Static_assert(offsetof(T, m) == offsetof(struct status_prefix, m), #T " prefix")
SAME_OFFSET(struct maas_machine_status, present);
SAME_OFFSET(struct maas_machine_status, ready);
SAME_OFFSET(struct maas_machine_status, has_ready);
SAME_OFFSET(struct maas_machine_status, provisioned);
SAME_OFFSET(struct maas_machine_status, has_provisioned);
SAME_OFFSET(struct maas_cluster_status, present);
SAME_OFFSET(struct maas_cluster_status, ready);
SAME_OFFSET(struct maas_cluster_status, has_ready);
SAME_OFFSET(struct maas_cluster_status, provisioned);
SAME_OFFSET(struct maas_cluster_status, has_provisioned);
SAME_OFFSET(struct maas_remediation_status, present); /* plain_status: present only */

static bool *flag(void *status, size_t off)
{
        return (bool *)((char *)status + off);
}

static bool cflag(const void *status, size_t off)
{
        return *(const bool *)((const char *)status + off);
}

/* ---- generic top level ---- */

static void decode_header(struct json_dec *d, const cJSON *obj)
{
        const char *s;

        (void)!json_get_string(d, obj, "apiVersion", &s);
        (void)!json_get_string(d, obj, "kind", &s);
}

static void decode_embedded(struct json_dec *d,
                            const cJSON *obj,
                            const char *const *path,
                            const struct schema_type *t,
                            void *dst)
{
        const cJSON *sub;
        size_t mark;

        if (json_get_object(d, obj, path[0], &sub) != CM_OK)
                return;
        mark = json_path_push_field(&d->path, path[0]);
        if (path[1])
                decode_embedded(d, sub, path + 1, t, dst);
        else
                schema_type_decode(d, sub, t, dst);
        json_path_pop(&d->path, mark);
}

static void decode_initialization(struct json_dec *d, const cJSON *status, void *dst)
{
        const cJSON *init;
        size_t mark;

        if (json_get_object(d, status, "initialization", &init) != CM_OK)
                return;
        mark = json_path_push_field(&d->path, "initialization");
        if (json_get_bool(d, init, "provisioned",
                          flag(dst, offsetof(struct status_prefix, provisioned))) == CM_OK)
                *flag(dst, offsetof(struct status_prefix, has_provisioned)) = true;
        json_path_pop(&d->path, mark);
}

static void decode_status(struct json_dec *d,
                          const cJSON *obj,
                          const struct schema_kind_desc *k,
                          void *dst)
{
        const cJSON *status;
        size_t mark;

        if (json_get_object(d, obj, "status", &status) != CM_OK)
                return;
        mark = json_path_push_field(&d->path, "status");
        *flag(dst, offsetof(struct status_prefix, present)) = true;
        schema_type_decode(d, status, k->status_type, dst);
        if (k->plain_status) {
                json_path_pop(&d->path, mark);
                return;
        }
        decode_initialization(d, status, dst);
        /* Reference v0.8 and earlier wrote only ready; HEAD sets both together. */
        if (!cflag(dst, offsetof(struct status_prefix, has_provisioned)) &&
            cflag(dst, offsetof(struct status_prefix, ready))) {
                *flag(dst, offsetof(struct status_prefix, provisioned)) = true;
                *flag(dst, offsetof(struct status_prefix, has_provisioned)) = true;
        }
        json_path_pop(&d->path, mark);
}

int schema_kind_decode(const struct schema_kind_desc *k,
                       const cJSON *obj,
                       enum schema_decode_mode mode,
                       void *dst,
                       struct json_errors *reterr)
{
        static const char *const meta_path[] = { "metadata", NULL };
        struct json_dec d;
        char *base = dst;
        cJSON *raw;

        json_dec_init(&d, NULL, reterr);
        if (json_as_object(&d, obj) != CM_OK)
                return CM_EINVAL;
        decode_header(&d, obj);
        decode_embedded(&d, obj, meta_path, &schema_meta_type, base + k->meta_off);
        decode_embedded(&d, obj, k->spec_path, k->spec_type, base + k->spec_off);
        if (k->status_type && mode != SCHEMA_DECODE_SPEC_VIEW)
                decode_status(&d, obj, k, base + k->status_off);
        if (d.failures) {
                schema_kind_release(k, dst);
                return CM_EINVAL;
        }
        if (mode != SCHEMA_DECODE_FULL)
                return CM_OK;
        raw = cJSON_Duplicate(obj, true);
        if (!raw)
                abort();
        memcpy(base + k->raw_off, &raw, sizeof(raw));
        return CM_OK;
}

static void encode_embedded(cJSON *obj,
                            const char *const *path,
                            const struct schema_type *t,
                            const void *src)
{
        bool created;
        cJSON *sub = json_child_object(obj, path[0], &created);

        if (path[1])
                encode_embedded(sub, path + 1, t, src);
        else
                schema_type_encode(sub, t, src);
        if (created && !sub->child)
                cJSON_DeleteItemFromObjectCaseSensitive(obj, path[0]);
}

static void encode_status(cJSON *root, const struct schema_kind_desc *k, const void *src)
{
        cJSON *status;
        cJSON *init;

        if (!cflag(src, offsetof(struct status_prefix, present))) {
                json_remove_unless_null(root, "status");
                return;
        }
        status = json_child_object(root, "status", NULL);
        schema_type_encode(status, k->status_type, src);
        if (k->plain_status)
                return;
        json_set_bool(status, "ready",
                      cflag(src, offsetof(struct status_prefix, has_ready)) &&
                              cflag(src, offsetof(struct status_prefix, ready)));
        init = json_child_object(status, "initialization", NULL);
        json_set_bool(init, "provisioned",
                      cflag(src, offsetof(struct status_prefix, has_provisioned)) &&
                              cflag(src, offsetof(struct status_prefix, provisioned)));
}

int schema_kind_encode(const struct schema_kind_desc *k, const void *src, cJSON **ret)
{
        static const char *const meta_path[] = { "metadata", NULL };
        const char *base = src;
        const cJSON *raw;
        cJSON *root;

        if (!src || !ret)
                return CM_EINVAL;
        memcpy(&raw, base + k->raw_off, sizeof(raw));
        root = raw ? cJSON_Duplicate(raw, true) : cJSON_CreateObject();
        if (!root)
                abort();
        if (!json_item(root, "apiVersion"))
                json_set_string(root, "apiVersion", SCHEMA_API_VERSION);
        if (!json_item(root, "kind"))
                json_set_string(root, "kind", k->kind);
        encode_embedded(root, meta_path, &schema_meta_type, base + k->meta_off);
        encode_embedded(root, k->spec_path, k->spec_type, base + k->spec_off);
        if (k->status_type)
                encode_status(root, k, base + k->status_off);
        *ret = root;
        return CM_OK;
}

void schema_kind_release(const struct schema_kind_desc *k, void *dst)
{
        char *base = dst;
        cJSON *raw;

        schema_type_release(&schema_meta_type, base + k->meta_off);
        schema_type_release(k->spec_type, base + k->spec_off);
        if (k->status_type)
                schema_type_release(k->status_type, base + k->status_off);
        memcpy(&raw, base + k->raw_off, sizeof(raw));
        cJSON_Delete(raw);
        memset(dst, 0, k->size);
}

/* ---- the kinds ---- */

static const char *const spec_path[] = { "spec", NULL };
static const char *const template_spec_path[] = { "spec", "template", "spec", NULL };

#define KIND(T, name, path, spec_t, status_t, status_off)                                       \
        {                                                                                       \
                name, path, spec_t, status_t, offsetof(T, meta), offsetof(T, spec), status_off, \
                        offsetof(T, raw), sizeof(T), false                                      \
        }

static const struct schema_kind_desc cluster_kind = KIND(struct maas_cluster,
                                                         SCHEMA_KIND_CLUSTER,
                                                         spec_path,
                                                         &cluster_spec_type,
                                                         &cluster_status_type,
                                                         offsetof(struct maas_cluster, status));
static const struct schema_kind_desc cluster_template_kind = KIND(struct maas_cluster_template,
                                                                  SCHEMA_KIND_CLUSTER_TEMPLATE,
                                                                  template_spec_path,
                                                                  &cluster_spec_type,
                                                                  NULL,
                                                                  0);
static const struct schema_kind_desc machine_kind = KIND(struct maas_machine,
                                                         SCHEMA_KIND_MACHINE,
                                                         spec_path,
                                                         &machine_spec_type,
                                                         &machine_status_type,
                                                         offsetof(struct maas_machine, status));
static const struct schema_kind_desc machine_template_kind = KIND(struct maas_machine_template,
                                                                  SCHEMA_KIND_MACHINE_TEMPLATE,
                                                                  template_spec_path,
                                                                  &machine_spec_type,
                                                                  NULL,
                                                                  0);

static const struct schema_kind_desc remediation_kind = {
        .kind = SCHEMA_KIND_REMEDIATION,
        .spec_path = spec_path,
        .spec_type = &remediation_spec_type,
        .status_type = &remediation_status_type,
        .meta_off = offsetof(struct maas_remediation, meta),
        .spec_off = offsetof(struct maas_remediation, spec),
        .status_off = offsetof(struct maas_remediation, status),
        .raw_off = offsetof(struct maas_remediation, raw),
        .size = sizeof(struct maas_remediation),
        .plain_status = true,
};
static const struct schema_kind_desc remediation_template_kind =
        KIND(struct maas_remediation_template,
             SCHEMA_KIND_REMEDIATION_TEMPLATE,
             template_spec_path,
             &remediation_spec_type,
             NULL,
             0);

/* Decodes into a scratch value so that *ret is written only on success. */
/* Room for the largest kind: decode_into decodes on the stack (a failed decode leaves ret
 * alone). A heap block of this size, freed next to the top of the heap, made glibc
 * consolidate its fast bins on every review. */
#define KIND_SIZE_MAX 1024
_Static_assert(sizeof(struct maas_cluster) <= KIND_SIZE_MAX, "maas_cluster fits");
_Static_assert(sizeof(struct maas_cluster_template) <= KIND_SIZE_MAX, "template fits");
_Static_assert(sizeof(struct maas_machine) <= KIND_SIZE_MAX, "maas_machine fits");
_Static_assert(sizeof(struct maas_machine_template) <= KIND_SIZE_MAX, "template fits");
_Static_assert(sizeof(struct maas_remediation) <= KIND_SIZE_MAX, "maas_remediation fits");
_Static_assert(sizeof(struct maas_remediation_template) <= KIND_SIZE_MAX, "template fits");

static int decode_into(const struct schema_kind_desc *k,
                       const cJSON *obj,
                       enum schema_decode_mode mode,
                       void *ret,
                       struct json_errors *reterr)
{
        _Alignas(max_align_t) unsigned char v[KIND_SIZE_MAX];
        int r;

        memset(v, 0, k->size);
        r = schema_kind_decode(k, obj, mode, v, reterr);
        if (r == CM_OK)
                memcpy(ret, v, k->size);
        return r;
}

/* Defines init, release, decode and encode of one kind. */
#define KIND_API(prefix, T, desc)                                                  \
        void prefix##_init(T *v)                                                   \
        {                                                                          \
                memset(v, 0, sizeof(*v));                                          \
        }                                                                          \
        void prefix##_release(T *v)                                                \
        {                                                                          \
                if (v)                                                             \
                        schema_kind_release(&(desc), v);                           \
        }                                                                          \
        int prefix##_decode(const cJSON *obj, T *ret, struct json_errors *reterr)  \
        {                                                                          \
                return decode_into(&(desc), obj, SCHEMA_DECODE_FULL, ret, reterr); \
        }                                                                          \
        int prefix##_encode(const T *v, cJSON **ret)                               \
        {                                                                          \
                return schema_kind_encode(&(desc), v, ret);                        \
        }

KIND_API(maas_cluster, struct maas_cluster, cluster_kind)
KIND_API(maas_cluster_template, struct maas_cluster_template, cluster_template_kind)
KIND_API(maas_machine, struct maas_machine, machine_kind)
KIND_API(maas_machine_template, struct maas_machine_template, machine_template_kind)
KIND_API(maas_remediation, struct maas_remediation, remediation_kind)
KIND_API(maas_remediation_template, struct maas_remediation_template, remediation_template_kind)

/* ---- kind-generic codec ---- */

const struct schema_kind_desc *schema_codec_find(const char *kind)
{
        static const struct schema_kind_desc *const all[] = {
                &cluster_kind,          &cluster_template_kind, &machine_kind,
                &machine_template_kind, &remediation_kind,      &remediation_template_kind,
        };

        for (size_t i = 0; kind && i < sizeof(all) / sizeof(all[0]); i++)
                if (strcmp(all[i]->kind, kind) == 0)
                        return all[i];
        return NULL;
}

int schema_decode_view(const struct schema_kind_desc *k,
                       const cJSON *obj,
                       void *ret,
                       struct json_errors *reterr)
{
        return decode_into(k, obj, SCHEMA_DECODE_VIEW, ret, reterr);
}

int schema_decode_spec_view(const struct schema_kind_desc *k,
                            const cJSON *obj,
                            void *ret,
                            struct json_errors *reterr)
{
        return decode_into(k, obj, SCHEMA_DECODE_SPEC_VIEW, ret, reterr);
}

void schema_release(const struct schema_kind_desc *k, void *v)
{
        if (v)
                schema_kind_release(k, v);
}

const void *schema_spec(const struct schema_kind_desc *k, const void *obj)
{
        return (const char *)obj + k->spec_off;
}

/* ---- spec-level codec ---- */

int maas_machine_spec_decode(struct json_dec *d, const cJSON *obj, struct maas_machine_spec *ret)
{
        size_t before = d->failures;

        if (json_as_object(d, obj) != CM_OK)
                return CM_EINVAL;
        schema_type_decode(d, obj, &machine_spec_type, ret);
        return d->failures == before ? CM_OK : CM_EINVAL;
}

void maas_machine_spec_encode(const struct maas_machine_spec *s, cJSON *obj)
{
        schema_type_encode(obj, &machine_spec_type, s);
}

void maas_machine_spec_release(struct maas_machine_spec *s)
{
        schema_type_release(&machine_spec_type, s);
        memset(s, 0, sizeof(*s));
}

int maas_cluster_spec_decode(struct json_dec *d, const cJSON *obj, struct maas_cluster_spec *ret)
{
        size_t before = d->failures;

        if (json_as_object(d, obj) != CM_OK)
                return CM_EINVAL;
        schema_type_decode(d, obj, &cluster_spec_type, ret);
        return d->failures == before ? CM_OK : CM_EINVAL;
}

void maas_cluster_spec_encode(const struct maas_cluster_spec *s, cJSON *obj)
{
        schema_type_encode(obj, &cluster_spec_type, s);
}

void maas_cluster_spec_release(struct maas_cluster_spec *s)
{
        schema_type_release(&cluster_spec_type, s);
        memset(s, 0, sizeof(*s));
}
