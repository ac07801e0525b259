/*
 * capi-sim KubeadmControlPlane and MachineDeployment controllers: spec.replicas → Machines
 * (the Machine controller then makes their bootstrap Secret and MaasMachine), scale down
 * newest first, replicas/readyReplicas, and the <cluster>-kubeconfig Secret once the first
 * control-plane machine is ready (see capi.h). A KubeadmControlPlane places each new Machine
 * in a failure domain as CAPI's does (util/failuredomains PickFewest): of the Cluster's
 * status.failureDomains marked controlPlane, the one with the fewest of its Machines not
 * being deleted, ties to the first listed; a MachineDeployment's Machines take its
 * template's spec.failureDomain. A changed template rolls out (rollout.c): a
 * MachineDeployment's Machines belong to MachineSets, one per template hash.
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

struct owner_desc {
        const struct kube_resource *r;
        const char *api_version;
        const char *ref_path[4];     /* to the MaasMachineTemplate reference */
        const char *version_path[4]; /* to the Kubernetes version */
        const char *fd_path[4];      /* to the template's failureDomain; NULL[0] = none */
        bool control_plane;
};

static struct owner_desc descs[CAPI_OWNER_KINDS] = {
        [CAPI_OWNER_KCP] = { &CAPI_RES_KCPS,
                             capi_contract.kcp_api_version,
                             { "spec", "machineTemplate", "infrastructureRef", NULL },
                             { "spec", "version", NULL },
                             { NULL },
                             true },
        [CAPI_OWNER_MD] = { &CAPI_RES_MDS,
                            capi_contract.api_version,
                            { "spec", "template", "spec", "infrastructureRef" },
                            { "spec", "template", "spec", "version" },
                            { "spec", "template", "spec", "failureDomain" },
                            false },
};

void capi_owner_set_contract(void)
{
        /* v1beta2 KCP: spec.machineTemplate.spec.infrastructureRef */
        descs[CAPI_OWNER_KCP].ref_path[2] = capi_contract.v1beta2 ? "spec" : "infrastructureRef";
        descs[CAPI_OWNER_KCP].ref_path[3] = capi_contract.v1beta2 ? "infrastructureRef" : NULL;
}

struct owner_ctx {
        struct capi_worker *w;
        enum capi_owner_kind k;
        const struct owner_desc *d;
        const struct kube_object *owner;
        const char *ns, *cluster;
        struct capi_member *m;
        size_t n, active, ready;
        /* a MachineDeployment's new MachineSet */
        char set_name[CAPI_SET_NAME_LEN], set_label[CAPI_HASH_LEN], set_uid[CAPI_UID_LEN];
};

static const cJSON *path4(const cJSON *o, const char *const p[4])
{
        for (size_t i = 0; i < 4 && p[i] && o; i++)
                o = cJSON_GetObjectItemCaseSensitive(o, p[i]);
        return o;
}

static cJSON *machine_doc(const struct owner_ctx *c,
                          const char *name,
                          const char *secret,
                          const char *tmpl,
                          const char *fd)
{
        const cJSON *o = kube_object_json(c->owner);
        const cJSON *ver = path4(o, c->d->version_path);
        cJSON *m = cJSON_CreateObject();
        cJSON *meta = json_child_object(m, "metadata", NULL);
        cJSON *spec = json_child_object(m, "spec", NULL);
        cJSON *ref;

        json_set_string(m, "apiVersion", capi_contract.api_version);
        json_set_string(m, "kind", "Machine");
        json_set_string(meta, "name", name);
        json_set_string(meta, "namespace", c->ns);
        capi_set_label(m, SCHEMA_LABEL_CLUSTER_NAME, c->cluster);
        capi_set_label(m, c->d->control_plane ? SCHEMA_LABEL_CONTROL_PLANE : CAPI_LABEL_DEPLOYMENT,
                       c->d->control_plane ? "" : kube_object_name(c->owner));
        json_set_string(json_child_object(meta, "annotations", NULL), CAPI_ANN_TEMPLATE, tmpl);
        capi_add_finalizer(m, CAPI_FINALIZER_MACHINE);
        if (c->d->control_plane) {
                capi_set_label(m, CAPI_LABEL_CP_NAME, kube_object_name(c->owner));
                capi_set_owner(m, c->d->api_version, c->d->r->kind, kube_object_name(c->owner),
                               kube_object_uid(c->owner), true);
        } else { /* its MachineSet's, as CAPI's */
                capi_set_label(m, CAPI_LABEL_SET, c->set_name);
                capi_set_label(m, CAPI_LABEL_HASH, c->set_label);
                capi_set_owner(m, capi_contract.api_version, "MachineSet", c->set_name, c->set_uid,
                               true);
        }
        json_set_string(spec, "clusterName", c->cluster);
        if (cJSON_IsString(ver))
                json_set_string(spec, "version", ver->valuestring);
        json_set_string(json_child_object(spec, "bootstrap", NULL), "dataSecretName", secret);
        if (fd)
                json_set_string(spec, "failureDomain", fd);
        ref = json_child_object(spec, "infrastructureRef", NULL);
        if (capi_contract.v1beta2) { /* {apiGroup, kind, name} */
                json_set_string(ref, "apiGroup", SCHEMA_GROUP);
        } else {
                json_set_string(ref, "apiVersion", SCHEMA_API_VERSION);
                json_set_string(ref, "namespace", c->ns);
        }
        json_set_string(ref, "kind", SCHEMA_KIND_MACHINE);
        json_set_string(ref, "name", name);
        return m;
}

/* Whether fd (an entry of the Cluster's status.failureDomains, list or map form) may hold
 * control planes; *ret_name its name. */
static bool cp_domain(const cJSON *fd, bool list, const char **ret_name)
{
        *ret_name = list ? json_find_str(fd, "name", NULL) : fd->string;
        return *ret_name && **ret_name && cJSON_IsTrue(json_find(fd, "controlPlane", NULL));
}

/* The failure domain for a new control-plane Machine (see the top), or NULL when the
 * Cluster lists none. Counts from the index, which holds the Machines created this pass. */
static const char *pick_failure_domain(const struct owner_ctx *c, const struct kube_object *cl)
{
        const cJSON *fds = json_find(kube_object_json(cl), "status", "failureDomains", NULL);
        struct capi_member *m = NULL;
        size_t n = capi_index_members(c->w->s->index, c->k, c->ns, kube_object_name(c->owner), &m);
        size_t best_count = SIZE_MAX;
        const char *best = NULL, *name;
        const cJSON *fd;

        cJSON_ArrayForEach (fd, fds) {
                size_t count = 0;

                if (!cp_domain(fd, cJSON_IsArray(fds), &name))
                        continue;
                for (size_t i = 0; i < n; i++)
                        count += !m[i].deleting && strcmp(m[i].failure_domain, name) == 0;
                if (count < best_count) {
                        best_count = count;
                        best = name;
                }
        }
        free(m);
        return best;
}

static int create_machine(struct owner_ctx *c, const struct kube_object *cl, const char *tmpl)
{
        char *name = capi_random_name(c->w->s, kube_object_name(c->owner));
        char *secret = xasprintf("%s-bootstrap", name);
        const char *fd =
                c->d->control_plane
                        ? pick_failure_domain(c, cl)
                        : json_find_str(path4(kube_object_json(c->owner), c->d->fd_path), NULL);
        cJSON *m = machine_doc(c, name, secret, tmpl, fd);
        const char *ver =
                json_find_str(path4(kube_object_json(c->owner), c->d->version_path), NULL);
        struct capi_member proto = { 0 };
        int err;

        snprintf(proto.name, sizeof(proto.name), "%s", name);
        snprintf(proto.failure_domain, sizeof(proto.failure_domain), "%s", fd ? fd : "");
        snprintf(proto.hash, sizeof(proto.hash), "%s", c->set_label);
        snprintf(proto.tmpl, sizeof(proto.tmpl), "%s", tmpl);
        snprintf(proto.version, sizeof(proto.version), "%s", ver ? ver : "");
        err = kube_create(c->w->kube, &CAPI_RES_MACHINES, c->ns, m, NULL, NULL);
        if (err == 0) {
                capi_index_put_local(c->w->s->index, c->k, c->ns, kube_object_name(c->owner),
                                     &proto);
                log_info(LOGGER, "created machine", "owner=%s/%s machine=%s failure_domain=%s",
                         c->ns, kube_object_name(c->owner), name, fd ? fd : "");
        }
        cJSON_Delete(m);
        free(secret);
        free(name);
        return err == CM_EEXIST ? 0 : err; /* a name clash: the next reconcile retries */
}

/* Whether any Machine is being deleted. */
static bool any_deleting(const struct owner_ctx *c)
{
        for (size_t i = 0; i < c->n; i++)
                if (c->m[i].deleting)
                        return true;
        return false;
}

/* How many of `more` Machines this reconcile may create (kubeadm: the first control plane
 * alone, the others once one is ready and, as KCP's preflight checks, none is being
 * deleted; workers once the control plane is). */
static size_t may_create(const struct owner_ctx *c, const struct kube_object *cl, size_t more)
{
        const cJSON *o = kube_object_json(cl);

        if (!capi_status_true(o, "infrastructureReady", "infrastructureProvisioned") || !more)
                return 0;
        if (c->d->control_plane) {
                if (c->active == 0)
                        return 1;
                if (c->ready == 0 || any_deleting(c))
                        return 0;
        } else if (!capi_status_true(o, "controlPlaneReady", "controlPlaneInitialized")) {
                return 0;
        }
        return more < CAPI_CREATE_BATCH ? more : CAPI_CREATE_BATCH;
}

static int delete_member(struct owner_ctx *c, size_t i, const char *why)
{
        int err = capi_delete(c->w->kube, &CAPI_RES_MACHINES, c->ns, c->m[i].name);

        if (err)
                return err;
        log_info(LOGGER, "deleted machine", "owner=%s/%s machine=%s why=%s", c->ns,
                 kube_object_name(c->owner), c->m[i].name, why);
        capi_index_mark_deleting(c->w->s->index, c->k, c->ns, kube_object_name(c->owner),
                                 c->m[i].name);
        c->m[i].deleting = true;
        c->active--;
        c->ready -= c->m[i].ready;
        return 0;
}

/* Owner remediation of Machines a MachineHealthCheck marked (OwnerRemediated False): a
 * MachineDeployment's MachineSet deletes every one, the replacements come from the replica
 * count; a KubeadmControlPlane one at a time, only while no other machine is going and
 * another is ready (CAPI's KCP keeps etcd quorum). */
static int remediate(struct owner_ctx *c)
{
        bool going = false;
        int err = 0;

        for (size_t i = 0; i < c->n; i++)
                going = going || c->m[i].deleting;
        for (size_t i = 0; i < c->n && err == 0; i++) {
                if (!c->m[i].remediate || c->m[i].deleting)
                        continue;
                if (c->d->control_plane && (going || c->ready <= c->m[i].ready))
                        break;
                err = delete_member(c, i, "remediation");
                going = true;
        }
        return err;
}

static int scale_down(struct owner_ctx *c, size_t want)
{
        int err = 0;

        for (size_t i = c->n; i-- > 0 && c->active > want && err == 0;) {
                if (c->m[i].deleting)
                        continue;
                err = delete_member(c, i, "scale down");
        }
        return err;
}

/* Owned by the KCP (as kubeadm's) and by the Cluster, so it outlives a KCP deleted before
 * the workers: GC removes an object once all its owners are gone. */
static int kubeconfig_secret(struct owner_ctx *c, const struct kube_object *cl)
{
        cJSON *sec = cJSON_CreateObject();
        cJSON *meta = json_child_object(sec, "metadata", NULL);
        char *name = xasprintf("%s-kubeconfig", c->cluster);
        int err;

        json_set_string(sec, "apiVersion", "v1");
        json_set_string(sec, "kind", "Secret");
        json_set_string(meta, "name", name);
        json_set_string(meta, "namespace", c->ns);
        capi_set_label(sec, SCHEMA_LABEL_CLUSTER_NAME, c->cluster);
        capi_set_owner(sec, c->d->api_version, c->d->r->kind, kube_object_name(c->owner),
                       kube_object_uid(c->owner), true);
        capi_set_owner(sec, capi_contract.api_version, "Cluster", kube_object_name(cl),
                       kube_object_uid(cl), false);
        json_set_string(sec, "type", CAPI_SECRET_TYPE);
        json_set_string(json_child_object(sec, "data", NULL), "value", c->w->s->kubeconfig_b64);
        err = kube_create(c->w->kube, &KUBE_RES_SECRETS, c->ns, sec, NULL, NULL);
        if (err == 0)
                log_info(LOGGER, "wrote kubeconfig", "name=%s/%s", c->ns, name);
        err = err == CM_EEXIST ? 0 : err; /* written by an earlier reconcile */
        cJSON_Delete(sec);
        free(name);
        return err;
}

static int write_status(struct owner_ctx *c,
                        const struct kube_object *cl,
                        size_t want,
                        size_t updated)
{
        const cJSON *o = kube_object_json(c->owner);
        cJSON *after = cJSON_Duplicate(o, true);
        cJSON *st = json_child_object(after, "status", NULL);
        int err = 0;

        if (!c->d->control_plane) {
                capi_set_label(after, SCHEMA_LABEL_CLUSTER_NAME, c->cluster);
                capi_set_owner(after, capi_contract.api_version, "Cluster", kube_object_name(cl),
                               kube_object_uid(cl), false);
        }
        json_set_int64(st, "replicas", (int64_t)c->active);
        json_set_int64(st, "readyReplicas", (int64_t)c->ready);
        json_set_int64(st, "updatedReplicas", (int64_t)updated);
        json_set_int64(st, "availableReplicas", (int64_t)c->ready);
        json_set_int64(st, "unavailableReplicas", (int64_t)(c->active - c->ready));
        if (c->d->control_plane && c->ready > 0 &&
            !cJSON_IsTrue(json_find(o, "status", "initialized", NULL))) {
                err = kubeconfig_secret(c, cl);
                json_set_bool(st, "initialized", true);
                json_set_bool(st, "ready", true);
        }
        if (!c->d->control_plane)
                json_set_string(st, "phase",
                                c->active < want   ? "ScalingUp"
                                : c->active > want ? "ScalingDown"
                                                   : "Running");
        if (err == 0)
                err = capi_write(c->w, c->d->r, o, after);
        cJSON_Delete(after);
        return err;
}

static void count_members(struct owner_ctx *c)
{
        c->n = capi_index_members(c->w->s->index, c->k, c->ns, kube_object_name(c->owner), &c->m);
}

static void count(struct owner_ctx *c)
{
        count_members(c);
        for (size_t i = 0; i < c->n; i++) {
                if (c->m[i].deleting)
                        continue;
                c->active++;
                c->ready += c->m[i].ready;
        }
}

/* Whether a control-plane Machine not being deleted is outdated (a rollout runs). */
static bool kcp_any_outdated(const struct owner_ctx *c, const char *tmpl)
{
        const char *ver =
                json_find_str(path4(kube_object_json(c->owner), c->d->version_path), NULL);

        for (size_t i = 0; i < c->n; i++)
                if (!c->m[i].deleting && capi_kcp_outdated(&c->m[i], tmpl, ver))
                        return true;
        return false;
}

/* The control plane's rollout step (rollout.c): creates or deletes at most one Machine,
 * none when this pass already created `created`; *ret_updated the up-to-date Machines. */
static int kcp_rollout(struct owner_ctx *c,
                       const struct kube_object *cl,
                       const char *tmpl,
                       size_t want,
                       size_t created,
                       size_t *ret_updated)
{
        const cJSON *o = kube_object_json(c->owner);
        const char *ver = json_find_str(path4(o, c->d->version_path), NULL);
        size_t surge = capi_int_or_percent(json_find(capi_rolling_update(o), "maxSurge", NULL),
                                           want, true, 1);
        bool *outdated = xcalloc(c->n ? c->n : 1, sizeof(*outdated));
        size_t del = 0;
        int err = 0;

        *ret_updated = created;
        for (size_t i = 0; i < c->n; i++) {
                outdated[i] = capi_kcp_outdated(&c->m[i], tmpl, ver);
                *ret_updated += !c->m[i].deleting && !outdated[i];
        }
        if (created)
                goto out;
        switch (capi_kcp_rollout_step(c->m, outdated, c->n, want, surge ? 1 : 0, &del)) {
        case CAPI_KCP_UP:
                if (may_create(c, cl, 1)) {
                        err = create_machine(c, cl, tmpl);
                        c->active += err == 0;
                        *ret_updated += err == 0;
                }
                break;
        case CAPI_KCP_DOWN:
                err = delete_member(c, del, "rollout");
                break;
        case CAPI_KCP_NONE:
        case CAPI_KCP_WAIT:
                break;
        }
out:
        free(outdated);
        return err;
}

/* The MachineDeployment's rolling update (rollout.c): the new MachineSet, its Machines
 * created, old ones deleted, every MachineSet's counts written. */
static int md_rollout(struct owner_ctx *c,
                      const struct kube_object *cl,
                      const char *tmpl,
                      size_t want,
                      size_t *ret_updated,
                      struct reconcile_result *res)
{
        const cJSON *o = kube_object_json(c->owner);
        bool *is_new = xcalloc(c->n ? c->n : 1, sizeof(*is_new));
        bool *del = xcalloc(c->n ? c->n : 1, sizeof(*del));
        size_t surge, unav, create, new_active = 0, old_active = 0;
        char hash[CAPI_HASH_LEN];
        int err = 0;

        capi_md_template_hash(o, hash);
        if (!capi_md_find_set(c->w, c->owner, c->cluster, hash, c->set_name, c->set_label))
                capi_md_set_name(kube_object_name(c->owner), kube_object_uid(c->owner), hash,
                                 c->set_name, c->set_label);
        capi_md_strategy(o, want, &surge, &unav);
        for (size_t i = 0; i < c->n; i++) {
                is_new[i] = strcmp(c->m[i].hash, c->set_label) == 0;
                if (!c->m[i].deleting) {
                        new_active += is_new[i];
                        old_active += !is_new[i];
                }
        }
        create = capi_md_rollout_plan(c->m, is_new, c->n, want, surge, unav, del);
        create = may_create(c, cl, create);
        if (create && !tmpl) {
                err = CM_EINVAL; /* logged by the controller */
                goto out;
        }
        err = capi_md_new_set(c->w, c->owner, c->cluster, c->set_name, c->set_label,
                              new_active + create, c->set_uid);
        if (err == 0 && create && !c->set_uid[0]) {
                create = 0; /* the informer has not shown the new MachineSet yet */
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, 200 };
        }
        for (size_t i = 0; i < create && err == 0; i++) {
                err = create_machine(c, cl, tmpl);
                c->active += err == 0;
                new_active += err == 0;
        }
        for (size_t i = 0; i < c->n && err == 0; i++)
                if (del[i])
                        err = delete_member(c, i, "rollout");
        if (err == 0 && old_active == 0 && c->active > want)
                err = scale_down(c, want);
        if (err == 0) {
                free(c->m);
                count_members(c); /* with what this pass created and deleted */
                err = capi_md_sync_sets(c->w, c->owner, c->cluster, c->set_name, c->m, c->n,
                                        new_active < want ? new_active : want);
        }
        *ret_updated = new_active < c->active ? new_active : c->active;
        if (err == 0 && create == CAPI_CREATE_BATCH)
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, 1 };
out:
        free(del);
        free(is_new);
        return err;
}

static int reconcile_replicas(struct owner_ctx *c,
                              const struct kube_object *cl,
                              struct reconcile_result *res)
{
        const cJSON *o = kube_object_json(c->owner);
        const cJSON *rep = json_find(o, "spec", "replicas", NULL);
        size_t want = cJSON_IsNumber(rep) && rep->valuedouble >= 0 ? (size_t)rep->valuedouble : 1;
        const char *tmpl = json_find_str(path4(o, c->d->ref_path), "name", NULL);
        size_t create, created = 0, updated = 0;
        int err = 0;

        count(c);
        err = remediate(c);
        if (err)
                return err;
        if (!c->d->control_plane) {
                err = md_rollout(c, cl, tmpl, want, &updated, res);
                return err ? err : write_status(c, cl, want, updated);
        }
        create = may_create(c, cl, c->active < want ? want - c->active : 0);
        if (create && !tmpl)
                return CM_EINVAL; /* logged by the controller */
        for (size_t i = 0; i < create && err == 0; i++) {
                err = create_machine(c, cl, tmpl);
                c->active += err == 0;
                created += err == 0;
        }
        if (err == 0 && c->active > want && !kcp_any_outdated(c, tmpl))
                err = scale_down(c, want);
        if (err == 0 && tmpl)
                err = kcp_rollout(c, cl, tmpl, want, created, &updated);
        if (err == 0)
                err = write_status(c, cl, want, updated);
        if (err == 0 && create == CAPI_CREATE_BATCH)
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, 1 };
        return err;
}

int capi_owner_reconcile(struct capi_worker *w,
                         enum capi_owner_kind k,
                         const char *ns,
                         const char *name,
                         struct reconcile_result *res)
{
        struct owner_ctx c = { .w = w, .k = k, .d = &descs[k], .ns = ns };
        struct kube_object *owner =
                informer_get(k == CAPI_OWNER_KCP ? w->s->kcps : w->s->mds, ns, name);
        struct kube_object *cl = NULL;
        int err = 0;

        if (!owner || capi_deleting(kube_object_json(owner)))
                goto out;
        c.owner = owner;
        c.cluster = capi_cluster_of(kube_object_json(owner));
        cl = c.cluster ? informer_get(w->s->clusters, ns, c.cluster) : NULL;
        if (!cl || capi_deleting(kube_object_json(cl)) || capi_paused(kube_object_json(cl)))
                goto out;
        err = reconcile_replicas(&c, cl, res);
out:
        free(c.m);
        kube_object_unref(cl);
        kube_object_unref(owner);
        return err;
}
