#pragma once
/*
 * capi_objects: the Cluster API core objects (Cluster, Machine) as the management cluster
 * serves them, in the one place that knows both shapes (kubernetes.md §4.3):
 *
 *   read                         v1beta2 (CAPI 1.11+)                       v1beta1 (CAPI <= 1.10)
 *   infrastructure provisioned   status.initialization.infrastructureProvisioned
 * status.infrastructureReady control plane initialized
 * status.initialization.controlPlaneInitialized    status.controlPlaneReady or condition
 * ControlPlaneInitialized references                   {apiGroup, kind, name} {apiVersion, kind,
 * name} paused, controlPlaneEndpoint, bootstrap.dataSecretName, nodeRef.name, failureDomain, the
 * control-plane label      same paths in both
 *
 * The version is discovered once at start (capi_api_discover: v1beta2 when served, else
 * v1beta1) and the informers list and watch that version, so every object they hold has
 * its shape. An object is read by its own apiVersion, and by the discovered version when
 * it carries none. Every reader is pure: any thread.
 */

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "kube_client.h"

#define CAPI_GROUP     "cluster.x-k8s.io"
#define CAPI_V1BETA2   "v1beta2"
#define CAPI_V1BETA1   "v1beta1"
#define CAPI_VERSION_N 16

/* Where the Cluster API core kinds are read. */
struct capi_api {
        char version[CAPI_VERSION_N];            /* CAPI_V1BETA2 or CAPI_V1BETA1; "" = unknown */
        bool v1beta2;                            /* version is CAPI_V1BETA2 */
        struct kube_resource clusters, machines; /* KUBE_RES_CLUSTERS/MACHINES at version */
};

/* Sets a for version: CAPI_V1BETA2 or CAPI_V1BETA1, CM_EUNSUPPORTED for any other. */
MUST_CHECK int capi_api_set(struct capi_api *a, const char *version);
/* Asks the server (GET /apis/cluster.x-k8s.io) and sets a to v1beta2 when served, else
 * v1beta1. CM_ENOTFOUND when the group is not served, CM_EUNSUPPORTED when it serves
 * neither version, or the client's error (e filled when non-NULL). */
MUST_CHECK int capi_api_discover(struct capi_api *a, struct kube_client *c, struct kube_error *e);
/* Whether a has a version (discovered or set). */
bool capi_api_known(const struct capi_api *a);

/* --- Cluster ------------------------------------------------------------------------------- */
bool capi_cluster_infra_provisioned(const struct capi_api *a, const cJSON *cluster);
bool capi_cluster_control_plane_initialized(const struct capi_api *a, const cJSON *cluster);
/* spec.paused (the paused annotation is the caller's: it is on any kind). */
bool capi_cluster_paused(const cJSON *cluster);
/* spec.controlPlaneEndpoint.host, or NULL (borrowed). */
const char *capi_cluster_endpoint_host(const cJSON *cluster);

/* The name in obj's spec.<field> reference (infrastructureRef, controlPlaneRef) when it
 * names kind in group (a reference without a group or apiVersion matches any group), or
 * NULL (borrowed). */
const char *capi_ref_name(const struct capi_api *a,
                          const cJSON *obj,
                          const char *field,
                          const char *group,
                          const char *kind);

/* --- Machine ------------------------------------------------------------------------------- */
/* spec.bootstrap.dataSecretName, or NULL (borrowed). */
const char *capi_machine_data_secret(const cJSON *machine);
/* status.nodeRef.name, or NULL (borrowed). */
const char *capi_machine_node_name(const cJSON *machine);
/* spec.failureDomain, or NULL (borrowed). */
const char *capi_machine_failure_domain(const cJSON *machine);
/* The cluster.x-k8s.io/control-plane label is present (on a Machine or any object). */
bool capi_is_control_plane(const cJSON *obj);

/* --- IPAM (the IPAddressClaim / IPAddress contract) ----------------------------------------- */

#define CAPI_IPAM_GROUP "ipam.cluster.x-k8s.io"

/* Where Cluster API's IPAM kinds are read and written: ipam.cluster.x-k8s.io v1beta2 (CAPI
 * 1.11+) or v1beta1 (CAPI 1.10). The fields capmaas uses have the same JSON in both: claim
 * spec.poolRef {apiGroup, kind, name}, spec.clusterName, status.addressRef.name and the Ready
 * condition in status.conditions; address spec.address, spec.prefix, spec.gateway. */
struct capi_ipam_api {
        char version[CAPI_VERSION_N];           /* "" = the group is not served */
        struct kube_resource claims, addresses; /* at version */
};

/* Sets a for version (CAPI_V1BETA2 or CAPI_V1BETA1; CM_EUNSUPPORTED for another). */
MUST_CHECK int capi_ipam_set(struct capi_ipam_api *a, const char *version);
/* GET /apis/ipam.cluster.x-k8s.io: a set to v1beta2 when served, else v1beta1.
 * CM_ENOTFOUND when the group is not served, CM_EUNSUPPORTED when neither version is, or
 * the client's error (e filled when non-NULL); a is left unknown on any error. */
MUST_CHECK int capi_ipam_discover(struct capi_ipam_api *a,
                                  struct kube_client *c,
                                  struct kube_error *e);
bool capi_ipam_known(const struct capi_ipam_api *a);
