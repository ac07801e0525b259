/*
 * maasmachine_node: the workload cluster's Node for a Deployed machine gets our providerID
 * (maas:///<zone>/<system_id>) and, when it has none, the MAAS zone as its
 * topology.kubernetes.io/zone label. Done once per machine (p->node_done); a Node that
 * already names another providerID is left alone.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "maasmachine_context.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

#define NODE_ZONE_LABEL "topology.kubernetes.io/zone"

static char *lower(const char *s)
{
        char *o = xstrdup(s);

        for (char *q = o; *q; q++)
                *q = (char)tolower((unsigned char)*q);
        return o;
}

/* The workload Node for this machine: lower(hostname), else its first label. */
static int find_node(struct kube_client *wl, const char *hostname, cJSON **ret)
{
        char *name = lower(hostname);
        char *dot = strchr(name, '.');
        int err = kube_get(wl, &KUBE_RES_NODES, NULL, name, ret, NULL);

        if (err == CM_ENOTFOUND && dot) {
                *dot = '\0';
                err = kube_get(wl, &KUBE_RES_NODES, NULL, name, ret, NULL);
        }
        free(name);
        return err;
}

static bool node_done(struct provider *p, const char *sid, bool set)
{
        bool done;

        pthread_mutex_lock(&p->lock);
        if (set)
                reconciler_table_put(&p->node_done, sid)->a = 1;
        done = reconciler_table_get(&p->node_done, sid) != NULL;
        pthread_mutex_unlock(&p->lock);
        return done;
}

/* A valid Kubernetes label value: at most 63 characters of [A-Za-z0-9._-], beginning and
 * ending with a letter or digit. */
static bool label_value_ok(const char *v)
{
        size_t n = strlen(v);

        if (n == 0 || n > 63 || !isalnum((unsigned char)v[0]) || !isalnum((unsigned char)v[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)v[i]) && !strchr("._-", v[i]))
                        return false;
        return true;
}

/* The zone label the Node should get: the MAAS zone, unless the Node already has one
 * (set by the kubelet, a cloud controller or the user: theirs stands) or the zone's name
 * is no valid label value. NULL when there is nothing to set. */
static const char *zone_to_label(const struct maasmachine_ctx *c, const cJSON *node)
{
        const char *zone = c->node.zone;

        if (!zone || !label_value_ok(zone) ||
            json_find_str(node, "metadata", "labels", NODE_ZONE_LABEL, NULL))
                return NULL;
        return zone;
}

/* The merge patch that sets what the Node lacks, or NULL when it lacks nothing. */
static char *node_patch(const char *provider_id, const char *zone)
{
        cJSON *p = cJSON_CreateObject();
        char *text = NULL;

        if (zone)
                (void)cJSON_AddStringToObject(
                        cJSON_AddObjectToObject(cJSON_AddObjectToObject(p, "metadata"), "labels"),
                        NODE_ZONE_LABEL, zone);
        if (provider_id)
                (void)cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "spec"), "providerID",
                                              provider_id);
        if (p->child)
                text = cJSON_PrintUnformatted(p);
        cJSON_Delete(p);
        return text;
}

static int patch_node(struct maasmachine_ctx *c, struct kube_client *wl, const cJSON *node)
{
        const char *want = c->mm.spec.provider_id;
        const char *have = json_find_str(node, "spec", "providerID", NULL);
        char *patch;
        int err = 0;

        if (have && *have && strcmp(have, want) != 0) {
                reconciler_event(c->p, c->cur, "Warning", "NodeProviderIDConflict",
                                 "Node %s already has providerID %s; leaving it alone",
                                 kube_meta_str(node, "name"), have);
                return 0;
        }
        patch = node_patch(have && strcmp(have, want) == 0 ? NULL : want, zone_to_label(c, node));
        if (!patch)
                return 0;
        err = kube_patch(wl,
                         &(struct kube_patch_opts){ .resource = &KUBE_RES_NODES,
                                                    .ns = NULL,
                                                    .name = kube_meta_str(node, "name"),
                                                    .subresource = NULL,
                                                    .type = KUBE_PATCH_MERGE,
                                                    .body = patch },
                         NULL, NULL);
        cJSON_free(patch);
        if (err)
                reconciler_event(c->p, c->cur, "Warning", "NodeProviderUpdateFailed",
                                 "Unable to set the providerID of Node %s: %s",
                                 kube_meta_str(node, "name"), cm_strerror(err));
        return err;
}

int maasmachine_node_provider_id(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        struct kube_client *wl = NULL;
        cJSON *node = NULL;
        int err;

        if (!c->node.hostname || !c->mm.spec.provider_id ||
            node_done(c->p, c->node.system_id, false))
                return 0;
        err = reconciler_workload_client(c->w, c->ns, kube_object_name(c->cluster), &wl);
        if (err == 0)
                err = find_node(wl, c->node.hostname, &node);
        if (err == 0)
                err = patch_node(c, wl, node);
        if (err == 0)
                (void)node_done(c->p, c->node.system_id, true);
        else {
                if (wl && err != CM_ENOTFOUND)
                        reconciler_workload_drop(c->w, c->ns, kube_object_name(c->cluster));
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = err == CM_ENOTFOUND ? 5000 : 30000;
        }
        cJSON_Delete(node);
        return 0;
}
