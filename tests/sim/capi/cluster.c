/*
 * capi-sim Cluster controller: ownership of the MaasCluster and the KubeadmControlPlane,
 * infrastructure and control-plane state into the Cluster, and deletion of everything
 * below a deleted Cluster (see capi.h).
 */
#include <string.h>

#include "capi.h"
#include "err.h"
#include "json.h"
#include "schema.h"
#include "xalloc.h"

#define DELETE_POLL_MS 1000

/* Makes obj controller-owned by the Cluster and labelled with its name. */
static int adopt(struct capi_worker *w,
                 const struct kube_resource *r,
                 const struct kube_object *obj,
                 const struct kube_object *cluster)
{
        cJSON *after = cJSON_Duplicate(kube_object_json(obj), true);
        bool changed;
        int err = 0;

        changed = capi_set_owner(after, capi_contract.api_version, "Cluster",
                                 kube_object_name(cluster), kube_object_uid(cluster), true);
        changed = capi_set_label(after, SCHEMA_LABEL_CLUSTER_NAME, kube_object_name(cluster)) ||
                  changed;
        if (changed)
                err = capi_write(w, r, kube_object_json(obj), after);
        cJSON_Delete(after);
        return err;
}

/* The infrastructure cluster's status.failureDomains (a list of {name, controlPlane,
 * attributes}, or the older map of name to the rest) into the Cluster's, as CAPI copies it:
 * in the contract's shape (v1beta2 a list, v1beta1 a map), only when the field is there. */
static void copy_failure_domains(cJSON *st, const cJSON *mc)
{
        const cJSON *fds = json_find(mc, "status", "failureDomains", NULL);
        cJSON *out = capi_contract.v1beta2 ? cJSON_CreateArray() : cJSON_CreateObject();
        const cJSON *fd;

        if (!cJSON_IsArray(fds) && !cJSON_IsObject(fds)) {
                cJSON_Delete(out);
                return;
        }
        cJSON_ArrayForEach (fd, fds) {
                const char *name =
                        cJSON_IsArray(fds) ? json_find_str(fd, "name", NULL) : fd->string;
                cJSON *e = cJSON_Duplicate(fd, true);

                if (!name || !cJSON_IsObject(e)) {
                        cJSON_Delete(e);
                        continue;
                }
                if (capi_contract.v1beta2) {
                        json_set_string(e, "name", name);
                        cJSON_AddItemToArray(out, e);
                } else {
                        cJSON_DeleteItemFromObjectCaseSensitive(e, "name");
                        cJSON_AddItemToObject(out, name, e);
                }
        }
        json_set_item(st, "failureDomains", out);
}

static void infra_status(cJSON *after, const cJSON *mc)
{
        cJSON *st = json_child_object(after, "status", NULL);
        bool ready = cJSON_IsTrue(json_find(mc, "status", "ready", NULL));
        bool prov = ready ||
                    cJSON_IsTrue(json_find(mc, "status", "initialization", "provisioned", NULL));
        const cJSON *ep = json_find(mc, "spec", "controlPlaneEndpoint", NULL);
        const char *host = json_find_str(ep, "host", NULL);

        capi_status_set(st, "infrastructureReady", "infrastructureProvisioned", prov);
        copy_failure_domains(st, mc);
        if (host && *host)
                json_set_item(json_child_object(after, "spec", NULL), "controlPlaneEndpoint",
                              cJSON_Duplicate(ep, true));
        json_set_string(st, "phase", prov ? "Provisioned" : "Provisioning");
}

static void cp_status(cJSON *after, const cJSON *kcp)
{
        cJSON *st = json_child_object(after, "status", NULL);
        const cJSON *rr = json_find(kcp, "status", "readyReplicas", NULL);
        bool ready = cJSON_IsTrue(json_find(kcp, "status", "initialized", NULL)) ||
                     (cJSON_IsNumber(rr) && rr->valuedouble >= 1);

        capi_status_set(st, "controlPlaneReady", "controlPlaneInitialized", ready);
}

static int cluster_normal(struct capi_worker *w, const struct kube_object *cl)
{
        struct capi *s = w->s;
        const cJSON *o = kube_object_json(cl);
        const char *ns = kube_object_namespace(cl);
        const char *mcname = json_find_str(o, "spec", "infrastructureRef", "name", NULL);
        const char *kcpname = json_find_str(o, "spec", "controlPlaneRef", "name", NULL);
        struct kube_object *mc = mcname ? informer_get(s->maasclusters, ns, mcname) : NULL;
        struct kube_object *kcp = kcpname ? informer_get(s->kcps, ns, kcpname) : NULL;
        cJSON *after = cJSON_Duplicate(o, true);
        int err = 0;

        capi_add_finalizer(after, CAPI_FINALIZER_CLUSTER);
        if (mc) {
                err = adopt(w, &KUBE_RES_MAASCLUSTERS, mc, cl);
                infra_status(after, kube_object_json(mc));
        }
        if (kcp) {
                if (err == 0)
                        err = adopt(w, &CAPI_RES_KCPS, kcp, cl);
                cp_status(after, kube_object_json(kcp));
        }
        if (err == 0)
                err = capi_write(w, &CAPI_RES_CLUSTERS, o, after);
        cJSON_Delete(after);
        kube_object_unref(mc);
        kube_object_unref(kcp);
        return err;
}

/* Deletes every cached object of r labelled with the cluster; returns how many exist. */
static int delete_labelled(struct capi_worker *w,
                           struct informer *inf,
                           const struct kube_resource *r,
                           const char *ns,
                           const char *cluster,
                           size_t *ret_n)
{
        struct kube_object **objs = NULL;
        size_t n = 0;
        int err = informer_list(inf, ns, cluster, &objs, &n);

        for (size_t i = 0; i < n && err == 0; i++)
                if (!capi_deleting(kube_object_json(objs[i])))
                        err = capi_delete(w->kube, r, ns, kube_object_name(objs[i]));
        kube_object_list_free(objs, n);
        if (err == 0)
                *ret_n = n;
        return err;
}

static int cluster_delete(struct capi_worker *w,
                          const struct kube_object *cl,
                          struct reconcile_result *res)
{
        struct capi *s = w->s;
        const cJSON *o = kube_object_json(cl);
        const char *ns = kube_object_namespace(cl);
        const char *mcname = json_find_str(o, "spec", "infrastructureRef", "name", NULL);
        const char *kcpname = json_find_str(o, "spec", "controlPlaneRef", "name", NULL);
        size_t n_md = 0, n_m = 0;
        struct kube_object *mc = NULL;
        cJSON *after;
        int err = 0;

        if (kcpname)
                err = capi_delete(w->kube, &CAPI_RES_KCPS, ns, kcpname);
        if (err == 0)
                err = delete_labelled(w, s->mds, &CAPI_RES_MDS, ns, kube_object_name(cl), &n_md);
        if (err == 0)
                err = delete_labelled(w, s->machines, &CAPI_RES_MACHINES, ns, kube_object_name(cl),
                                      &n_m);
        if (err || n_m) {
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, DELETE_POLL_MS };
                return err;
        }
        mc = mcname ? informer_get(s->maasclusters, ns, mcname) : NULL;
        if (mc) {
                if (!capi_deleting(kube_object_json(mc)))
                        err = capi_delete(w->kube, &KUBE_RES_MAASCLUSTERS, ns, mcname);
                kube_object_unref(mc);
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, DELETE_POLL_MS };
                return err;
        }
        after = cJSON_Duplicate(o, true);
        capi_remove_finalizer(after, CAPI_FINALIZER_CLUSTER);
        err = capi_write(w, &CAPI_RES_CLUSTERS, o, after);
        cJSON_Delete(after);
        return err == CM_ENOTFOUND ? 0 : err;
}

int capi_cluster_reconcile(struct capi_worker *w,
                           const char *ns,
                           const char *name,
                           struct reconcile_result *res)
{
        struct kube_object *cl = informer_get(w->s->clusters, ns, name);
        int err;

        if (!cl)
                return 0;
        if (capi_paused(kube_object_json(cl)))
                err = 0;
        else if (capi_deleting(kube_object_json(cl)))
                err = cluster_delete(w, cl, res);
        else
                err = cluster_normal(w, cl);
        kube_object_unref(cl);
        return err;
}
