/*
 * capi-sim helpers: JSON lookups, metadata edits, names, writes (see capi.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "capi.h"
#include "err.h"
#include "json.h"
#include "patch_helper.h"
#include "schema.h"
#include "xalloc.h"

struct capi_contract capi_contract;
struct kube_resource CAPI_RES_CLUSTERS, CAPI_RES_MACHINES, CAPI_RES_KCPS, CAPI_RES_MDS,
        CAPI_RES_MSS, CAPI_RES_MHCS;

int capi_set_contract(const char *version)
{
        struct kube_resource *all[] = { &CAPI_RES_CLUSTERS, &CAPI_RES_MACHINES,   &CAPI_RES_KCPS,
                                        &CAPI_RES_MDS,      &CAPI_RES_MSS,        &CAPI_RES_MHCS,
                                        &CAPI_RES_IPCLAIMS, &CAPI_RES_IPADDRESSES };
        bool v2 = version && strcmp(version, "v1beta2") == 0;

        if (!v2 && !(version && strcmp(version, "v1beta1") == 0))
                return CM_EINVAL;
        capi_contract.v1beta2 = v2;
        capi_contract.version = v2 ? "v1beta2" : "v1beta1";
        (void)snprintf(capi_contract.api_version, sizeof(capi_contract.api_version),
                       CAPI_GROUP "/%s", capi_contract.version);
        (void)snprintf(capi_contract.kcp_api_version, sizeof(capi_contract.kcp_api_version),
                       "controlplane." CAPI_GROUP "/%s", capi_contract.version);
        CAPI_RES_CLUSTERS = KUBE_RES_CLUSTERS;
        CAPI_RES_MACHINES = KUBE_RES_MACHINES;
        CAPI_RES_KCPS =
                (struct kube_resource){ "controlplane.cluster.x-k8s.io", NULL,
                                        "kubeadmcontrolplanes", "KubeadmControlPlane", true };
        CAPI_RES_MDS = (struct kube_resource){ CAPI_GROUP, NULL, "machinedeployments",
                                               "MachineDeployment", true };
        CAPI_RES_MSS =
                (struct kube_resource){ CAPI_GROUP, NULL, "machinesets", "MachineSet", true };
        CAPI_RES_MHCS = (struct kube_resource){ CAPI_GROUP, NULL, "machinehealthchecks",
                                                "MachineHealthCheck", true };
        CAPI_RES_IPCLAIMS = (struct kube_resource){ CAPI_IPAM_GROUP, NULL, "ipaddressclaims",
                                                    "IPAddressClaim", true };
        CAPI_RES_IPADDRESSES =
                (struct kube_resource){ CAPI_IPAM_GROUP, NULL, "ipaddresses", "IPAddress", true };
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
                all[i]->version = capi_contract.version;
        capi_owner_set_contract();
        return 0;
}

bool capi_status_true(const cJSON *o, const char *v1beta1, const char *v1beta2)
{
        return cJSON_IsTrue(json_find(o, "status", v1beta1, NULL)) ||
               cJSON_IsTrue(json_find(o, "status", "initialization", v1beta2, NULL));
}

void capi_status_set(cJSON *status, const char *v1beta1, const char *v1beta2, bool value)
{
        json_set_bool(json_child_object(status, "initialization", NULL), v1beta2, value);
        if (!capi_contract.v1beta2)
                json_set_bool(status, v1beta1, value);
}

const char *capi_owner_name(const cJSON *o, const char *kind)
{
        const cJSON *ref;
        const char *any = NULL;

        cJSON_ArrayForEach (ref, json_find(o, "metadata", "ownerReferences", NULL)) {
                const char *k = json_find_str(ref, "kind", NULL);
                const char *n = json_find_str(ref, "name", NULL);

                if (!k || !n || strcmp(k, kind) != 0)
                        continue;
                if (cJSON_IsTrue(json_find(ref, "controller", NULL)))
                        return n;
                any = any ? any : n;
        }
        return any;
}

bool capi_set_owner(cJSON *obj,
                    const char *api_version,
                    const char *kind,
                    const char *name,
                    const char *uid,
                    bool controller)
{
        cJSON *meta = json_child_object(obj, "metadata", NULL);
        cJSON *refs = cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences");
        cJSON *ref;

        cJSON_ArrayForEach (ref, refs) {
                const char *u = json_find_str(ref, "uid", NULL);

                if (u && strcmp(u, uid) == 0)
                        return false;
        }
        if (!cJSON_IsArray(refs)) {
                refs = cJSON_CreateArray();
                json_set_item(meta, "ownerReferences", refs);
        }
        ref = cJSON_CreateObject();
        json_set_string(ref, "apiVersion", api_version);
        json_set_string(ref, "kind", kind);
        json_set_string(ref, "name", name);
        json_set_string(ref, "uid", uid);
        if (controller) {
                json_set_bool(ref, "controller", true);
                json_set_bool(ref, "blockOwnerDeletion", true);
        }
        cJSON_AddItemToArray(refs, ref);
        return true;
}

bool capi_set_label(cJSON *obj, const char *key, const char *value)
{
        cJSON *labels = json_child_object(json_child_object(obj, "metadata", NULL), "labels", NULL);
        const char *cur = json_find_str(labels, key, NULL);

        if (cur && strcmp(cur, value) == 0)
                return false;
        json_set_string(labels, key, value);
        return true;
}

bool capi_has_finalizer(const cJSON *obj, const char *f)
{
        const cJSON *x;

        cJSON_ArrayForEach (x, json_find(obj, "metadata", "finalizers", NULL)) {
                if (cJSON_IsString(x) && strcmp(x->valuestring, f) == 0)
                        return true;
        }
        return false;
}

void capi_add_finalizer(cJSON *obj, const char *f)
{
        cJSON *meta = json_child_object(obj, "metadata", NULL);
        cJSON *list = cJSON_GetObjectItemCaseSensitive(meta, "finalizers");

        if (capi_has_finalizer(obj, f))
                return;
        if (!cJSON_IsArray(list)) {
                list = cJSON_CreateArray();
                json_set_item(meta, "finalizers", list);
        }
        cJSON_AddItemToArray(list, cJSON_CreateString(f));
}

void capi_remove_finalizer(cJSON *obj, const char *f)
{
        cJSON *list = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "finalizers");
        int i = 0;
        cJSON *x = list ? list->child : NULL;

        while (x) {
                cJSON *next = x->next;

                if (cJSON_IsString(x) && strcmp(x->valuestring, f) == 0)
                        cJSON_DeleteItemFromArray(list, i);
                else
                        i++;
                x = next;
        }
}

bool capi_deleting(const cJSON *obj)
{
        return json_find_str(obj, "metadata", "deletionTimestamp", NULL) != NULL;
}

bool capi_paused(const cJSON *cluster)
{
        return cJSON_IsTrue(json_find(cluster, "spec", "paused", NULL)) ||
               json_find(cluster, "metadata", "annotations", "cluster.x-k8s.io/paused", NULL);
}

char *capi_random_name(struct capi *s, const char *prefix)
{
        static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        unsigned char rnd[5];
        char suffix[6];
        uint64_t v = 0;

        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                v = atomic_fetch_add(&s->name_seed, 0x9e3779b97f4a7c15ull);
                memcpy(rnd, &v, sizeof(rnd));
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
                suffix[i] = alnum[rnd[i] % (sizeof(alnum) - 1)];
        suffix[5] = '\0';
        return xasprintf("%s-%s", prefix, suffix);
}

int capi_write(struct capi_worker *w,
               const struct kube_resource *r,
               const cJSON *before,
               const cJSON *after)
{
        return patch_helper_write(w->kube, r, before, after, NULL, NULL, NULL);
}

int capi_create(struct kube_client *c,
                const struct kube_resource *r,
                const char *ns,
                const cJSON *obj,
                cJSON **ret)
{
        int err = kube_create(c, r, ns, obj, ret, NULL);

        return err == CM_EEXIST ? 0 : err;
}

int capi_delete(struct kube_client *c,
                const struct kube_resource *r,
                const char *ns,
                const char *name)
{
        int err = kube_delete(c, r, ns, name,
                              &(struct kube_delete_opts){ .propagation_policy = "Background",
                                                          .grace_period_seconds = -1 },
                              NULL);

        return err == CM_ENOTFOUND ? 0 : err;
}

const char *capi_cluster_of(const cJSON *o)
{
        const char *c = json_find_str(o, "metadata", "labels", SCHEMA_LABEL_CLUSTER_NAME, NULL);

        if (!c)
                c = json_find_str(o, "spec", "clusterName", NULL);
        if (!c)
                c = capi_owner_name(o, "Cluster");
        return c;
}
