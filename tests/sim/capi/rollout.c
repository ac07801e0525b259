/*
 * capi-sim rollouts: what Cluster API's MachineDeployment and KubeadmControlPlane
 * controllers do when the machine template changes (see capi.h).
 *
 * MachineDeployment (CAPI internal/controllers/machinedeployment, rolling update):
 *   - the template's rollout fields (infrastructureRef, bootstrap, version, failureDomain)
 *     hash to the machine-template-hash; the MachineSet whose hash label starts with it is
 *     the new one, every other MachineSet of the MachineDeployment is old. A new MachineSet
 *     is named <md>-<5 characters> as CAPI names it (here derived from the hash and the
 *     MachineDeployment's uid, so a reconcile that runs before the informer saw its create
 *     finds the same name);
 *   - scale up the new set while every set's Machines together stay under replicas +
 *     maxSurge; scale down old sets while at least replicas - maxUnavailable stay available
 *     (old unavailable Machines first), counting the new set's unavailable Machines against
 *     it; maxSurge and maxUnavailable are integers or percentages of replicas (surge rounded
 *     up, unavailable down), defaults 1 and 0; both 0 is read as maxUnavailable 1, as
 *     Kubernetes' Deployment;
 *   - an old MachineSet with no Machine left is deleted.
 * KubeadmControlPlane (CAPI controlplane/kubeadm, rollout):
 *   - a Machine is outdated when its template (the cloned-from annotation) or version
 *     differs from the KCP's; while any is, and every Machine is ready and none is being
 *     deleted: with maxSurge 1 (the default; v1beta2 spec.rollout.strategy.rollingUpdate,
 *     v1beta1 spec.rolloutStrategy.rollingUpdate) one new Machine
 *     is created while there are no more than replicas, then the oldest outdated Machine of
 *     the failure domain holding the most goes; with maxSurge 0 that Machine goes first and
 *     the replica count brings the new one. One control plane at a time, either way.
 * The arithmetic of both is in rollout_rules.c (pure); this file holds the MachineSets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "schema.h"
#include "xalloc.h"

#define LOGGER "capi-sim"

/* ---- MachineSet objects ---- */

static cJSON *set_doc(const struct kube_object *md,
                      const char *cluster,
                      const char *name,
                      const char *label,
                      size_t replicas)
{
        const cJSON *o = kube_object_json(md);
        cJSON *ms = cJSON_CreateObject();
        cJSON *meta = json_child_object(ms, "metadata", NULL);
        cJSON *spec = json_child_object(ms, "spec", NULL);
        cJSON *tmpl = json_child_object(spec, "template", NULL);
        const cJSON *mspec = json_find(o, "spec", "template", "spec", NULL);
        cJSON *sel =
                json_child_object(json_child_object(spec, "selector", NULL), "matchLabels", NULL);

        json_set_string(ms, "apiVersion", capi_contract.api_version);
        json_set_string(ms, "kind", "MachineSet");
        json_set_string(meta, "name", name);
        json_set_string(meta, "namespace", kube_object_namespace(md));
        capi_set_label(ms, SCHEMA_LABEL_CLUSTER_NAME, cluster);
        capi_set_label(ms, CAPI_LABEL_DEPLOYMENT, kube_object_name(md));
        capi_set_label(ms, CAPI_LABEL_HASH, label);
        capi_set_owner(ms, capi_contract.api_version, "MachineDeployment", kube_object_name(md),
                       kube_object_uid(md), true);
        json_set_string(spec, "clusterName", cluster);
        json_set_int64(spec, "replicas", (int64_t)replicas);
        json_set_string(sel, CAPI_LABEL_DEPLOYMENT, kube_object_name(md));
        json_set_string(sel, CAPI_LABEL_HASH, label);
        json_set_string(
                json_child_object(json_child_object(tmpl, "metadata", NULL), "labels", NULL),
                CAPI_LABEL_HASH, label);
        if (mspec)
                json_set_item(tmpl, "spec", cJSON_Duplicate(mspec, true));
        return ms;
}

int capi_md_new_set(struct capi_worker *w,
                    const struct kube_object *md,
                    const char *cluster,
                    const char *name,
                    const char *label,
                    size_t replicas,
                    char uid[CAPI_UID_LEN])
{
        struct kube_object *cached = informer_get(w->s->mss, kube_object_namespace(md), name);
        cJSON *doc = NULL, *made = NULL;
        const char *made_uid;
        int err = 0;

        uid[0] = '\0';
        if (cached) {
                snprintf(uid, CAPI_UID_LEN, "%s", kube_object_uid(cached));
                goto out;
        }
        doc = set_doc(md, cluster, name, label, replicas);
        err = kube_create(w->kube, &CAPI_RES_MSS, kube_object_namespace(md), doc, &made, NULL);
        if (err == CM_EEXIST) {
                err = 0; /* created by an earlier pass the informer has not shown yet */
                goto out;
        }
        if (err)
                goto out;
        made_uid = json_find_str(made, "metadata", "uid", NULL);
        snprintf(uid, CAPI_UID_LEN, "%s", made_uid ? made_uid : "");
        log_info(LOGGER, "created machineset", "owner=%s/%s machineset=%s hash=%s",
                 kube_object_namespace(md), kube_object_name(md), name, label);
out:
        cJSON_Delete(made);
        cJSON_Delete(doc);
        kube_object_unref(cached);
        return err;
}

bool capi_md_find_set(struct capi_worker *w,
                      const struct kube_object *md,
                      const char *cluster,
                      const char *hash,
                      char name[CAPI_SET_NAME_LEN],
                      char label[CAPI_HASH_LEN])
{
        struct kube_object **sets = NULL;
        size_t n_sets = 0, hlen = strlen(hash);
        bool found = false;

        if (informer_list(w->s->mss, kube_object_namespace(md), cluster, &sets, &n_sets) != 0)
                return false;
        for (size_t i = 0; i < n_sets && !found; i++) {
                const cJSON *o = kube_object_json(sets[i]);
                const char *owner = capi_owner_name(o, "MachineDeployment");
                const char *l = json_find_str(o, "metadata", "labels", CAPI_LABEL_HASH, NULL);

                if (!owner || strcmp(owner, kube_object_name(md)) != 0 || capi_deleting(o) || !l ||
                    strncmp(l, hash, hlen) != 0 || l[hlen] != '-')
                        continue;
                snprintf(name, CAPI_SET_NAME_LEN, "%s", kube_object_name(sets[i]));
                snprintf(label, CAPI_HASH_LEN, "%s", l);
                found = true;
        }
        kube_object_list_free(sets, n_sets);
        return found;
}

/* Members of m[0..n) in the set labelled `label` (not being deleted) and how many ready. */
static void set_counts(const struct capi_member *m,
                       size_t n,
                       const char *label,
                       size_t *ret_active,
                       size_t *ret_ready,
                       size_t *ret_all)
{
        *ret_active = *ret_ready = *ret_all = 0;
        for (size_t i = 0; i < n; i++) {
                if (strcmp(m[i].hash, label) != 0)
                        continue;
                ++*ret_all;
                if (m[i].deleting)
                        continue;
                ++*ret_active;
                *ret_ready += m[i].ready;
        }
}

static int sync_set(struct capi_worker *w,
                    const struct kube_object *ms,
                    const struct capi_member *m,
                    size_t n,
                    bool is_new,
                    size_t new_replicas)
{
        const cJSON *o = kube_object_json(ms);
        const char *label = json_find_str(o, "metadata", "labels", CAPI_LABEL_HASH, NULL);
        size_t active, ready, all;
        cJSON *after, *st;
        int err;

        set_counts(m, n, label ? label : "", &active, &ready, &all);
        if (!is_new && all == 0) {
                err = capi_delete(w->kube, &CAPI_RES_MSS, kube_object_namespace(ms),
                                  kube_object_name(ms));
                if (err == 0 && !capi_deleting(o))
                        log_info(LOGGER, "deleted machineset", "machineset=%s/%s why=rolled out",
                                 kube_object_namespace(ms), kube_object_name(ms));
                return err;
        }
        after = cJSON_Duplicate(o, true);
        json_set_int64(json_child_object(after, "spec", NULL), "replicas",
                       (int64_t)(is_new ? new_replicas : active));
        st = json_child_object(after, "status", NULL);
        json_set_int64(st, "replicas", (int64_t)all);
        json_set_int64(st, "readyReplicas", (int64_t)ready);
        json_set_int64(st, "availableReplicas", (int64_t)ready);
        err = capi_write(w, &CAPI_RES_MSS, o, after);
        cJSON_Delete(after);
        return err;
}

int capi_md_sync_sets(struct capi_worker *w,
                      const struct kube_object *md,
                      const char *cluster,
                      const char *new_name,
                      const struct capi_member *m,
                      size_t n,
                      size_t new_replicas)
{
        struct kube_object **sets = NULL;
        size_t n_sets = 0;
        int err = informer_list(w->s->mss, kube_object_namespace(md), cluster, &sets, &n_sets);

        for (size_t i = 0; i < n_sets && err == 0; i++) {
                const cJSON *o = kube_object_json(sets[i]);
                const char *owner = capi_owner_name(o, "MachineDeployment");

                if (!owner || strcmp(owner, kube_object_name(md)) != 0 || capi_deleting(o))
                        continue;
                err = sync_set(w, sets[i], m, n, strcmp(kube_object_name(sets[i]), new_name) == 0,
                               new_replicas);
        }
        kube_object_list_free(sets, n_sets);
        return err == CM_ENOTFOUND || err == CM_ECONFLICT ? 0 : err;
}
