/*
 * capi_objects: the Cluster API core objects in either served version (capi_objects.h).
 */
#include "capi_objects.h"

#include <stdio.h>
#include <string.h>

#include "compiler.h"
#include "err.h"
#include "json.h"
#include "kube_discovery.h"
#include "schema.h"

int capi_api_set(struct capi_api *a, const char *version)
{
        bool v2 = version && strcmp(version, CAPI_V1BETA2) == 0;

        if (!v2 && !(version && strcmp(version, CAPI_V1BETA1) == 0))
                return CM_EUNSUPPORTED;
        *a = (struct capi_api){ .v1beta2 = v2,
                                .clusters = KUBE_RES_CLUSTERS,
                                .machines = KUBE_RES_MACHINES };
        (void)snprintf(a->version, sizeof(a->version), "%s", version);
        a->clusters.version = a->version;
        a->machines.version = a->version;
        return 0;
}

int capi_api_discover(struct capi_api *a, struct kube_client *c, struct kube_error *e)
{
        static const char *const prefer[] = { CAPI_V1BETA2, CAPI_V1BETA1 };
        struct kube_group_versions g = { 0 };
        const char *v;
        int err;

        err = kube_discover_group(c, CAPI_GROUP, &g, e);
        if (err)
                return err;
        v = kube_group_pick(&g, prefer, ARRAY_SIZE(prefer));
        err = v ? capi_api_set(a, v) : CM_EUNSUPPORTED;
        kube_group_versions_release(&g);
        return err;
}

bool capi_api_known(const struct capi_api *a)
{
        return a && a->version[0];
}

int capi_ipam_set(struct capi_ipam_api *a, const char *version)
{
        if (!version || (strcmp(version, CAPI_V1BETA2) != 0 && strcmp(version, CAPI_V1BETA1) != 0))
                return CM_EUNSUPPORTED;
        *a = (struct capi_ipam_api){
                .claims = { CAPI_IPAM_GROUP, NULL, "ipaddressclaims", "IPAddressClaim", true },
                .addresses = { CAPI_IPAM_GROUP, NULL, "ipaddresses", "IPAddress", true },
        };
        (void)snprintf(a->version, sizeof(a->version), "%s", version);
        a->claims.version = a->version;
        a->addresses.version = a->version;
        return 0;
}

int capi_ipam_discover(struct capi_ipam_api *a, struct kube_client *c, struct kube_error *e)
{
        static const char *const prefer[] = { CAPI_V1BETA2, CAPI_V1BETA1 };
        struct kube_group_versions g = { 0 };
        const char *v;
        int err;

        *a = (struct capi_ipam_api){ 0 };
        err = kube_discover_group(c, CAPI_IPAM_GROUP, &g, e);
        if (err)
                return err;
        v = kube_group_pick(&g, prefer, ARRAY_SIZE(prefer));
        err = v ? capi_ipam_set(a, v) : CM_EUNSUPPORTED;
        kube_group_versions_release(&g);
        return err;
}

bool capi_ipam_known(const struct capi_ipam_api *a)
{
        return a && a->version[0];
}

/* Whether obj is read as v1beta2: by its apiVersion, else by the served version. */
static bool v1beta2(const struct capi_api *a, const cJSON *obj)
{
        const char *av = json_find_str(obj, "apiVersion", NULL);

        if (av && strcmp(av, CAPI_GROUP "/" CAPI_V1BETA2) == 0)
                return true;
        if (av && strcmp(av, CAPI_GROUP "/" CAPI_V1BETA1) == 0)
                return false;
        return a && a->v1beta2;
}

bool capi_cluster_infra_provisioned(const struct capi_api *a, const cJSON *cluster)
{
        if (v1beta2(a, cluster))
                return cJSON_IsTrue(json_find(cluster, "status", "initialization",
                                              "infrastructureProvisioned", NULL));
        return cJSON_IsTrue(json_find(cluster, "status", "infrastructureReady", NULL));
}

/* The v1beta1 condition type is True in status.conditions. */
static bool v1beta1_condition(const cJSON *obj, const char *type)
{
        const cJSON *k;

        cJSON_ArrayForEach (k, json_find(obj, "status", "conditions", NULL)) {
                const char *t = json_find_str(k, "type", NULL);
                const char *s = json_find_str(k, "status", NULL);

                if (t && s && strcmp(t, type) == 0)
                        return strcmp(s, "True") == 0;
        }
        return false;
}

bool capi_cluster_control_plane_initialized(const struct capi_api *a, const cJSON *cluster)
{
        if (v1beta2(a, cluster))
                return cJSON_IsTrue(json_find(cluster, "status", "initialization",
                                              "controlPlaneInitialized", NULL));
        return cJSON_IsTrue(json_find(cluster, "status", "controlPlaneReady", NULL)) ||
               v1beta1_condition(cluster, "ControlPlaneInitialized");
}

bool capi_cluster_paused(const cJSON *cluster)
{
        return cJSON_IsTrue(json_find(cluster, "spec", "paused", NULL));
}

const char *capi_cluster_endpoint_host(const cJSON *cluster)
{
        return json_find_str(cluster, "spec", "controlPlaneEndpoint", "host", NULL);
}

/* Whether a reference's group is group: v1beta2 apiGroup, v1beta1 the part of apiVersion
 * before the '/' (none given: any group). */
static bool ref_group_is(bool v2, const cJSON *ref, const char *group)
{
        const char *g = json_find_str(ref, v2 ? "apiGroup" : "apiVersion", NULL);
        size_t n = group ? strlen(group) : 0;

        if (!g || !group)
                return true;
        if (v2)
                return strcmp(g, group) == 0;
        return strncmp(g, group, n) == 0 && g[n] == '/';
}

const char *capi_ref_name(const struct capi_api *a,
                          const cJSON *obj,
                          const char *field,
                          const char *group,
                          const char *kind)
{
        const cJSON *ref = json_find(obj, "spec", field, NULL);
        const char *k = json_find_str(ref, "kind", NULL);
        const char *name = json_find_str(ref, "name", NULL);

        if (!k || !name || !*name || (kind && strcmp(k, kind) != 0) ||
            !ref_group_is(v1beta2(a, obj), ref, group))
                return NULL;
        return name;
}

const char *capi_machine_data_secret(const cJSON *machine)
{
        const char *s = json_find_str(machine, "spec", "bootstrap", "dataSecretName", NULL);

        return s && *s ? s : NULL;
}

const char *capi_machine_node_name(const cJSON *machine)
{
        const char *s = json_find_str(machine, "status", "nodeRef", "name", NULL);

        return s && *s ? s : NULL;
}

const char *capi_machine_failure_domain(const cJSON *machine)
{
        const char *s = json_find_str(machine, "spec", "failureDomain", NULL);

        return s && *s ? s : NULL;
}

bool capi_is_control_plane(const cJSON *obj)
{
        return json_find(obj, "metadata", "labels", SCHEMA_LABEL_CONTROL_PLANE, NULL) != NULL;
}
