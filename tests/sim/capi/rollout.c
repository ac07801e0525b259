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

static uint32_t fnv32(uint32_t h, const char *s)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

size_t capi_int_or_percent(const cJSON *v, size_t replicas, bool round_up, size_t def)
{
        const char *s = cJSON_GetStringValue(v);
        char *end;
        unsigned long pct;

        if (cJSON_IsNumber(v))
                return v->valuedouble >= 0 ? (size_t)v->valuedouble : def;
        if (!s || !*s)
                return def;
        pct = strtoul(s, &end, 10);
        if (end == s || strcmp(end, "%") != 0 || pct > 100)
                return def;
        return round_up ? (replicas * pct + 99) / 100 : replicas * pct / 100;
}

const cJSON *capi_rolling_update(const cJSON *owner)
{
        const cJSON *ru = json_find(owner, "spec", "rollout", "strategy", "rollingUpdate", NULL);

        if (!ru) /* v1beta1: MachineDeployment spec.strategy, KCP spec.rolloutStrategy */
                ru = json_find(owner, "spec", "strategy", "rollingUpdate", NULL);
        if (!ru)
                ru = json_find(owner, "spec", "rolloutStrategy", "rollingUpdate", NULL);
        return ru;
}

void capi_md_strategy(const cJSON *md, size_t want, size_t *ret_surge, size_t *ret_unavailable)
{
        const cJSON *ru = capi_rolling_update(md);
        size_t surge = capi_int_or_percent(json_find(ru, "maxSurge", NULL), want, true, 1);
        size_t unav = capi_int_or_percent(json_find(ru, "maxUnavailable", NULL), want, false, 0);

        if (surge == 0 && unav == 0)
                unav = 1;
        *ret_surge = surge;
        *ret_unavailable = unav;
}

void capi_md_template_hash(const cJSON *md, char out[CAPI_HASH_LEN])
{
        static const char *const fields[] = { "infrastructureRef", "bootstrap", "version",
                                              "failureDomain" };
        const cJSON *spec = json_find(md, "spec", "template", "spec", NULL);
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                const cJSON *f = json_find(spec, fields[i], NULL);
                char *text = f ? cJSON_PrintUnformatted(f) : NULL;

                h = fnv32(fnv32(h, fields[i]), text ? text : "-");
                cJSON_free(text);
        }
        snprintf(out, CAPI_HASH_LEN, "%u", h);
}

void capi_md_set_name(const char *md_name,
                      const char *md_uid,
                      const char *hash,
                      char name[CAPI_SET_NAME_LEN],
                      char label[CAPI_HASH_LEN])
{
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789"; /* Kubernetes' rand */
        const uint32_t n = (uint32_t)(sizeof(alphabet) - 1);
        uint32_t h = fnv32(fnv32(2166136261u, md_uid ? md_uid : ""), hash);
        char suffix[6];

        for (size_t i = 0; i < 5; i++) {
                suffix[i] = alphabet[h % n];
                h = h / n * 2654435761u + (uint32_t)i;
        }
        suffix[5] = '\0';
        snprintf(name, CAPI_SET_NAME_LEN, "%.57s-%s", md_name, suffix);
        snprintf(label, CAPI_HASH_LEN, "%s-%s", hash, suffix);
}

size_t capi_md_rollout_plan(const struct capi_member *m,
                            const bool *is_new,
                            size_t n,
                            size_t want,
                            size_t surge,
                            size_t unavailable,
                            bool *del)
{
        size_t new_active = 0, new_ready = 0, old_active = 0, ready = 0, create = 0, total;
        size_t min_avail = want > unavailable ? want - unavailable : 0;
        size_t new_unavail, may_go;

        for (size_t i = 0; i < n; i++) {
                del[i] = false;
                if (m[i].deleting)
                        continue;
                ready += m[i].ready;
                if (is_new[i]) {
                        new_active++;
                        new_ready += m[i].ready;
                } else {
                        old_active++;
                }
        }
        total = new_active + old_active;
        if (new_active < want && total < want + surge) {
                create = want + surge - total;
                if (create > want - new_active)
                        create = want - new_active;
        }
        if (old_active == 0)
                return create;
        total += create;
        new_unavail = new_active + create - new_ready;
        if (total <= min_avail + new_unavail)
                return create;
        may_go = total - min_avail - new_unavail;
        /* old unavailable Machines first: they cost no availability */
        for (size_t i = 0; i < n && may_go > 0; i++) {
                if (m[i].deleting || is_new[i] || m[i].ready)
                        continue;
                del[i] = true;
                may_go--;
        }
        /* then old available ones, oldest first, while enough stay available */
        for (size_t i = 0; i < n && ready > min_avail; i++) {
                if (m[i].deleting || is_new[i] || !m[i].ready)
                        continue;
                del[i] = true;
                ready--;
        }
        return create;
}

bool capi_kcp_outdated(const struct capi_member *m, const char *tmpl, const char *version)
{
        return (tmpl && strcmp(m->tmpl, tmpl) != 0) ||
               (version && *version && strcmp(m->version, version) != 0);
}

enum capi_kcp_step capi_kcp_rollout_step(const struct capi_member *m,
                                         const bool *outdated,
                                         size_t n,
                                         size_t want,
                                         size_t surge,
                                         size_t *ret_del)
{
        size_t active = 0, n_outdated = 0, best_count = 0;
        const char *best_fd = NULL;

        for (size_t i = 0; i < n; i++) {
                if (m[i].deleting || !m[i].ready)
                        return CAPI_KCP_WAIT; /* one at a time, all healthy first */
                active++;
                n_outdated += outdated[i];
        }
        if (n_outdated == 0)
                return CAPI_KCP_NONE;
        if (active < want + (surge ? 1 : 0))
                return active < want ? CAPI_KCP_NONE : CAPI_KCP_UP;
        /* the failure domain with the most Machines that has an outdated one, its oldest */
        for (size_t i = 0; i < n; i++) {
                size_t count = 0;

                if (!outdated[i])
                        continue;
                for (size_t j = 0; j < n; j++)
                        count += strcmp(m[j].failure_domain, m[i].failure_domain) == 0;
                if (!best_fd || count > best_count) {
                        best_fd = m[i].failure_domain;
                        best_count = count;
                        *ret_del = i;
                }
        }
        return CAPI_KCP_DOWN;
}

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
