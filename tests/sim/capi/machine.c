/*
 * capi-sim Machine controller: the bootstrap Secret, the MaasMachine cloned from the
 * template, a Node in the workload API once the MaasMachine is ready (kubelet joining),
 * Machine status mirrored from the MaasMachine, and deletion (MaasMachine, Node, bootstrap
 * Secret, then the finalizer). See capi.h.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base64.h"
#include "capi.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "patch_helper.h"
#include "rfc3339.h"
#include "schema.h"
#include "xalloc.h"

#define LOGGER           "capi-sim"
#define DELETE_POLL_MS   500
#define PAUSE_POLL_MS    1000
#define TEMPLATE_POLL_MS 1000

struct mctx {
        struct capi_worker *w;
        const struct kube_object *m;
        const char *ns, *cluster, *mm_name;
        cJSON *after, *status;
};

static char *node_name(const cJSON *mm)
{
        const char *h = json_find_str(mm, "status", "hostname", NULL);
        char *n;

        if (!h || !*h)
                return NULL;
        n = xstrdup(h);
        for (char *p = n; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return n;
}

static bool is_control_plane(const cJSON *o)
{
        return json_find_str(o, "metadata", "labels", SCHEMA_LABEL_CONTROL_PLANE, NULL) != NULL;
}

/* A new object {apiVersion, kind, metadata{name, namespace, cluster-name label}}. */
static cJSON *new_obj(const struct mctx *c,
                      const char *api_version,
                      const char *kind,
                      const char *name)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *meta = json_child_object(o, "metadata", NULL);

        json_set_string(o, "apiVersion", api_version);
        json_set_string(o, "kind", kind);
        json_set_string(meta, "name", name);
        if (c->ns && *c->ns)
                json_set_string(meta, "namespace", c->ns);
        if (c->cluster)
                capi_set_label(o, SCHEMA_LABEL_CLUSTER_NAME, c->cluster);
        return o;
}

static int bootstrap_secret(struct mctx *c)
{
        const char *name =
                json_find_str(kube_object_json(c->m), "spec", "bootstrap", "dataSecretName", NULL);
        char *cfg, *b64;
        cJSON *sec, *data;
        int err;

        if (!name || capi_status_true(kube_object_json(c->m), "bootstrapReady",
                                      "bootstrapDataSecretCreated"))
                return 0;
        cfg = xasprintf("#cloud-config\n# capi-sim bootstrap data for Machine %s/%s\n"
                        "runcmd:\n  - echo 'joining cluster %s'\n",
                        c->ns, kube_object_name(c->m), c->cluster ? c->cluster : "");
        sec = new_obj(c, "v1", "Secret", name);
        capi_set_owner(sec, capi_contract.api_version, "Machine", kube_object_name(c->m),
                       kube_object_uid(c->m), false);
        json_set_string(sec, "type", CAPI_SECRET_TYPE);
        data = json_child_object(sec, "data", NULL);
        b64 = base64_encode(cfg, strlen(cfg));
        json_set_string(data, "value", b64);
        free(b64);
        b64 = base64_encode("cloud-config", strlen("cloud-config"));
        json_set_string(data, "format", b64);
        err = capi_create(c->w->kube, &KUBE_RES_SECRETS, c->ns, sec, NULL);
        if (err == 0) {
                capi_status_set(c->status, "bootstrapReady", "bootstrapDataSecretCreated", true);
        }
        free(b64);
        free(cfg);
        cJSON_Delete(sec);
        return err;
}

static int create_maasmachine(struct mctx *c, struct reconcile_result *res)
{
        const char *tname = json_find_str(kube_object_json(c->m), "metadata", "annotations",
                                          CAPI_ANN_TEMPLATE, NULL);
        struct kube_object *t = tname ? informer_get(c->w->s->templates, c->ns, tname) : NULL;
        const cJSON *spec =
                t ? json_find(kube_object_json(t), "spec", "template", "spec", NULL) : NULL;
        const cJSON *label;
        cJSON *mm;
        int err;

        if (!spec) {
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, TEMPLATE_POLL_MS };
                kube_object_unref(t);
                return 0;
        }
        mm = new_obj(c, SCHEMA_API_VERSION, SCHEMA_KIND_MACHINE, c->mm_name);
        /* the Machine's labels, as CAPI clones the infrastructure machine with them
         * (cluster-name, control-plane, control-plane-name, deployment-name, set-name, ...) */
        cJSON_ArrayForEach (label, json_find(kube_object_json(c->m), "metadata", "labels", NULL))
                if (cJSON_IsString(label))
                        capi_set_label(mm, label->string, label->valuestring);
        capi_set_owner(mm, capi_contract.api_version, "Machine", kube_object_name(c->m),
                       kube_object_uid(c->m), true);
        json_set_item(mm, "spec", cJSON_Duplicate(spec, true));
        err = capi_create(c->w->kube, &KUBE_RES_MAASMACHINES, c->ns, mm, NULL);
        cJSON_Delete(mm);
        kube_object_unref(t);
        return err;
}

/* What kubelet would report: Ready, and the Machine's Kubernetes version. */
static void node_status(cJSON *n, const cJSON *machine)
{
        cJSON *st = json_child_object(n, "status", NULL);
        cJSON *conds = cJSON_CreateArray();
        cJSON *ready = cJSON_CreateObject();
        const char *ver = json_find_str(machine, "spec", "version", NULL);

        json_set_string(ready, "type", "Ready");
        json_set_string(ready, "status", "True");
        json_set_string(ready, "reason", "KubeletReady");
        json_set_string(ready, "message", "kubelet is posting ready status (capi-sim)");
        cJSON_AddItemToArray(conds, ready);
        json_set_item(st, "conditions", conds);
        if (ver)
                json_set_string(json_child_object(st, "nodeInfo", NULL), "kubeletVersion", ver);
}

static int ensure_node(struct mctx *c, const cJSON *mm, const char *name)
{
        struct kube_object *node = informer_get(c->w->s->nodes, NULL, name);
        const char *want = json_find_str(mm, "spec", "providerID", NULL);
        const char *have =
                node ? json_find_str(kube_object_json(node), "spec", "providerID", NULL) : NULL;
        cJSON *n, *ann;
        int err = 0;

        if (node && want && have && strcmp(want, have) == 0) {
                cJSON *ref = json_child_object(c->status, "nodeRef", NULL);

                json_set_string(ref, "name", name);
                if (!capi_contract.v1beta2) { /* v1beta1: an ObjectReference */
                        json_set_string(ref, "apiVersion", "v1");
                        json_set_string(ref, "kind", "Node");
                        json_set_string(ref, "uid", kube_object_uid(node));
                }
        }
        if (!node) {
                n = new_obj(&(struct mctx){ .cluster = c->cluster }, "v1", "Node", name);
                ann = json_child_object(json_child_object(n, "metadata", NULL), "annotations",
                                        NULL);
                json_set_string(ann, CAPI_ANN_MACHINE, kube_object_name(c->m));
                json_set_string(ann, CAPI_ANN_CLUSTER_NS, c->ns);
                capi_set_label(n, "kubernetes.io/hostname", name);
                if (is_control_plane(kube_object_json(c->m)))
                        capi_set_label(n, "node-role.kubernetes.io/control-plane", "");
                node_status(n, kube_object_json(c->m));
                err = capi_create(c->w->wl, &KUBE_RES_NODES, NULL, n, NULL);
                if (err == 0)
                        log_info(LOGGER, "node joined", "node=%s machine=%s/%s", name, c->ns,
                                 kube_object_name(c->m));
                cJSON_Delete(n);
        }
        kube_object_unref(node);
        return err;
}

/* Standing in for kubelet: the Node's Ready is True while the MaasMachine is ready, and
 * Unknown ("Kubelet stopped posting node status", as the node lifecycle controller writes)
 * once it is not: its host was powered off, released or lost. */
static int kubelet_posts(struct mctx *c, const cJSON *mm, bool ready)
{
        char *host = node_name(mm);
        const char *ref = json_find_str(c->status, "nodeRef", "name", NULL);
        const char *name = ref ? ref : host;
        struct kube_object *node = name ? informer_get(c->w->s->nodes, NULL, name) : NULL;
        const char *want = ready ? "True" : "Unknown";
        cJSON *after, *cond;
        char ts[RFC3339_LEN];
        int err = 0;

        if (!node) {
                free(host);
                return 0;
        }
        after = cJSON_Duplicate(kube_object_json(node), true);
        cJSON_ArrayForEach (cond, json_find(after, "status", "conditions", NULL)) {
                const char *t = json_find_str(cond, "type", NULL);
                const char *st = json_find_str(cond, "status", NULL);

                if (!t || strcmp(t, "Ready") != 0 || (st && strcmp(st, want) == 0))
                        continue;
                rfc3339_format(time(NULL), ts);
                json_set_string(cond, "status", want);
                json_set_string(cond, "reason", ready ? "KubeletReady" : "NodeStatusUnknown");
                json_set_string(cond, "message",
                                ready ? "kubelet is posting ready status (capi-sim)"
                                      : "Kubelet stopped posting node status.");
                json_set_string(cond, "lastTransitionTime", ts);
                err = patch_helper_write(c->w->wl, &KUBE_RES_NODES, kube_object_json(node), after,
                                         NULL, NULL, NULL);
                if (err == 0)
                        log_info(LOGGER, "node ready", "node=%s status=%s", name, want);
        }
        cJSON_Delete(after);
        kube_object_unref(node);
        free(host);
        return err == CM_ENOTFOUND ? 0 : err;
}

/* CAPI 1.10 (v1beta1) copies an infrastructure machine's terminal failure into the Machine,
 * which goes Failed; CAPI 1.11+ no longer reads these fields. */
static bool copy_failure(struct mctx *c, const cJSON *mm)
{
        const char *reason = json_find_str(mm, "status", "failureReason", NULL);
        const char *msg = json_find_str(mm, "status", "failureMessage", NULL);

        if (capi_contract.v1beta2 || (!reason && !msg))
                return false;
        if (reason)
                json_set_string(c->status, "failureReason", reason);
        if (msg)
                json_set_string(c->status, "failureMessage", msg);
        return true;
}

static int mirror(struct mctx *c, const cJSON *mm)
{
        bool ready = cJSON_IsTrue(json_find(mm, "status", "ready", NULL)) ||
                     cJSON_IsTrue(json_find(mm, "status", "initialization", "provisioned", NULL));
        const cJSON *addrs = json_find(mm, "status", "addresses", NULL);
        const char *pid = json_find_str(mm, "spec", "providerID", NULL);
        char *name = ready ? node_name(mm) : NULL;
        int err = 0;

        capi_status_set(c->status, "infrastructureReady", "infrastructureProvisioned", ready);
        if (cJSON_IsArray(addrs))
                json_set_item(c->status, "addresses", cJSON_Duplicate(addrs, true));
        if (pid && ready)
                json_set_string(json_child_object(c->after, "spec", NULL), "providerID", pid);
        if (name)
                err = ensure_node(c, mm, name);
        if (err == 0) /* kubelet runs while the host is deployed, on and (maas-sim) up */
                err = kubelet_posts(
                        c, mm,
                        cJSON_IsTrue(json_find(mm, "status", "ready", NULL)) &&
                                capi_kubelet_up(c->w->s,
                                                json_find_str(mm, "spec", "systemID", NULL)));
        json_set_string(c->status, "phase",
                        copy_failure(c, mm)                     ? "Failed"
                        : json_find(c->status, "nodeRef", NULL) ? "Running"
                        : ready                                 ? "Provisioned"
                                                                : "Provisioning");
        free(name);
        return err;
}

static int machine_normal(struct mctx *c, struct reconcile_result *res)
{
        struct kube_object *mm = informer_get(c->w->s->maasmachines, c->ns, c->mm_name);
        int err = bootstrap_secret(c);

        if (err == 0 && mm)
                err = mirror(c, kube_object_json(mm));
        else if (err == 0 && !capi_status_true(kube_object_json(c->m), "infrastructureReady",
                                               "infrastructureProvisioned"))
                err = create_maasmachine(c, res);
        if (!mm && !json_find(c->status, "phase", NULL))
                json_set_string(c->status, "phase", "Provisioning");
        if (err == 0)
                err = capi_write(c->w, &CAPI_RES_MACHINES, kube_object_json(c->m), c->after);
        kube_object_unref(mm);
        return err;
}

/* The MaasMachine as cached, else as the API has it (the cache may lag a fresh create). */
static int find_mm(struct mctx *c, cJSON **ret)
{
        struct kube_object *mm = informer_get(c->w->s->maasmachines, c->ns, c->mm_name);
        int err;

        if (mm) {
                *ret = cJSON_Duplicate(kube_object_json(mm), true);
                kube_object_unref(mm);
                return 0;
        }
        err = kube_get(c->w->kube, &KUBE_RES_MAASMACHINES, c->ns, c->mm_name, ret, NULL);
        if (err == CM_ENOTFOUND)
                *ret = NULL;
        return err == CM_ENOTFOUND ? 0 : err;
}

static int machine_delete(struct mctx *c, struct reconcile_result *res)
{
        cJSON *mm = NULL;
        char *node;
        const char *ref = json_find_str(c->status, "nodeRef", "name", NULL);
        const char *secret =
                json_find_str(kube_object_json(c->m), "spec", "bootstrap", "dataSecretName", NULL);
        int err = find_mm(c, &mm);

        json_set_string(c->status, "phase", "Deleting");
        node = mm ? node_name(mm) : (ref ? xstrdup(ref) : NULL);
        if (err == 0 && node)
                err = capi_delete(c->w->wl, &KUBE_RES_NODES, NULL, node);
        if (err == 0 && mm) {
                if (!capi_deleting(mm))
                        err = capi_delete(c->w->kube, &KUBE_RES_MAASMACHINES, c->ns, c->mm_name);
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, DELETE_POLL_MS };
        } else if (err == 0) {
                if (secret)
                        err = capi_delete(c->w->kube, &KUBE_RES_SECRETS, c->ns, secret);
                capi_remove_finalizer(c->after, CAPI_FINALIZER_MACHINE);
        }
        if (err == 0)
                err = capi_write(c->w, &CAPI_RES_MACHINES, kube_object_json(c->m), c->after);
        free(node);
        cJSON_Delete(mm);
        return err == CM_ENOTFOUND ? 0 : err;
}

int capi_machine_reconcile(struct capi_worker *w,
                           const char *ns,
                           const char *name,
                           struct reconcile_result *res)
{
        struct kube_object *m = informer_get(w->s->machines, ns, name);
        struct kube_object *cl = NULL;
        struct mctx c = { .w = w, .m = m, .ns = ns };
        bool paused;
        int err;

        if (!m)
                return 0;
        c.cluster = capi_cluster_of(kube_object_json(m));
        cl = c.cluster ? informer_get(w->s->clusters, ns, c.cluster) : NULL;
        paused = cl && capi_paused(kube_object_json(cl));
        kube_object_unref(cl);
        if (paused) { /* looked at again until unpaused (no Cluster → Machine watch) */
                kube_object_unref(m);
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, PAUSE_POLL_MS };
                return 0;
        }
        c.mm_name = json_find_str(kube_object_json(m), "spec", "infrastructureRef", "name", NULL);
        if (!c.mm_name) {
                kube_object_unref(m);
                return 0; /* nothing this simulator can do for it */
        }
        c.after = cJSON_Duplicate(kube_object_json(m), true);
        c.status = json_child_object(c.after, "status", NULL);
        if (capi_deleting(kube_object_json(m)))
                err = machine_delete(&c, res);
        else
                err = machine_normal(&c, res);
        cJSON_Delete(c.after);
        kube_object_unref(m);
        return err;
}
