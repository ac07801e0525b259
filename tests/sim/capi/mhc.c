/*
 * capi-sim MachineHealthCheck controller: the part of CAPI's that decides which Machines are
 * unhealthy and marks them for their owner to remediate (kubernetes.md §4; CAPI's
 * machinehealthcheck_targets.go). Kept minimal, faithful where it acts:
 *
 *   - nothing while the Cluster is paused (clusterctl move pauses it) or absent;
 *   - targets: Machines of spec.clusterName in the MHC's namespace whose labels match
 *     spec.selector.matchLabels (matchExpressions are not evaluated: such an MHC selects
 *     nothing), not being deleted, owned by a MachineDeployment or KubeadmControlPlane;
 *   - unhealthy when (in CAPI's order) the Machine has status.failureReason or
 *     failureMessage (the v1beta1 contract, CAPI 1.10: copied from a failed infrastructure
 *     machine; CAPI 1.11+ no longer looks), its nodeRef names a Node the workload cluster no
 *     longer has, or a Node condition matches an unhealthy condition for longer than its
 *     timeout (v1beta1 spec.unhealthyConditions[].timeout, v1beta2
 *     spec.checks.unhealthyNodeConditions[].timeoutSeconds);
 *   - remediation only while the unhealthy count is within v1beta1 spec.maxUnhealthy /
 *     v1beta2 spec.remediation.triggerIf.unhealthyLessThanOrEqualTo (an integer or a
 *     percentage of the targets); a marked Machine gets MachineHealthCheckSucceeded False and
 *     OwnerRemediated False (reason WaitingForRemediation), which its owner acts on (owner.c);
 *   - external remediation (v1beta2 spec.remediation.templateRef, v1beta1
 *     spec.remediationTemplate): a marked Machine gets MachineHealthCheckSucceeded False (and,
 *     v1beta2, ExternallyRemediated False, WaitingForRemediation) but no OwnerRemediated;
 *     instead the remediation object is created from the template (CAPI's GenerateTemplate:
 *     the template's kind without "Template", named after the Machine, owned by it, with the
 *     template's spec.template metadata and spec, the cluster-name label and the cloned-from
 *     annotations), once. When such a Machine is healthy again its remediation object is
 *     deleted and MachineHealthCheckSucceeded goes True. The provider gives up by setting
 *     OwnerRemediated False, which the owners act on as above (owner.c);
 *   - status: expectedMachines, currentHealthy, remediationsAllowed; requeued for the next
 *     timeout to expire.
 * Not here: nodeStartupTimeout, unhealthyMachineConditions, unhealthyRange.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "parse.h"
#include "rfc3339.h"
#include "schema.h"
#include "xalloc.h"

#define LOGGER     "capi-sim"
#define MAX_CHECKS 16

#define COALESCE_MIN_MS 3000u
#define PASS_SHARE      20u /* the wait is this many times the last pass */

static _Atomic uint64_t last_pass_ms;

uint64_t capi_mhc_coalesce_ms(void)
{
        uint64_t pass = last_pass_ms * PASS_SHARE;

        return pass > COALESCE_MIN_MS ? pass : COALESCE_MIN_MS;
}

static uint64_t monotonic_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

struct check {
        const char *type, *status;
        int64_t timeout_s;
};

/* An external remediation template reference, as the resources of the template and of the
 * remediation objects made from it. */
struct ext_ref {
        char group[128], version[32];
        char tkind[64], tplural[80]; /* the template: MaasRemediationTemplate */
        char kind[64], plural[80];   /* the request: MaasRemediation */
        const char *name;            /* the template's, in the MHC's cJSON */
        struct kube_resource tres, res;
};

struct mhc_ctx {
        struct capi_worker *w;
        const cJSON *mhc;
        const struct ext_ref *ext; /* NULL: owner remediation */
        const char *ns;
        struct check checks[MAX_CHECKS];
        size_t n_checks;
        struct kube_object **targets;
        size_t n, cap;
        int64_t now, next_s; /* next_s: seconds until a timeout expires; 0 = none */
};

/* obj[key] as an array, replacing anything else there. */
static cJSON *child_array(cJSON *obj, const char *key)
{
        cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);

        if (cJSON_IsArray(a))
                return a;
        a = cJSON_CreateArray();
        json_set_item(obj, key, a);
        return a;
}

static bool labels_match(const cJSON *want, const cJSON *obj)
{
        const cJSON *l;

        cJSON_ArrayForEach (l, want) {
                const char *have = json_find_str(obj, "metadata", "labels", l->string, NULL);

                if (!cJSON_IsString(l) || !have || strcmp(have, l->valuestring) != 0)
                        return false;
        }
        return true;
}

static bool owned_by_remediator(const cJSON *m)
{
        return capi_owner_name(m, "MachineDeployment") || capi_owner_name(m, "MachineSet") ||
               capi_owner_name(m, "KubeadmControlPlane");
}

/* informer_each over the cluster's Machines: keeps the targets. */
static void keep_target(void *arg, struct kube_object *obj)
{
        struct mhc_ctx *c = arg;
        const cJSON *m = kube_object_json(obj);
        const cJSON *sel = json_find(c->mhc, "spec", "selector", NULL);

        if (json_find(sel, "matchExpressions", NULL) ||
            !labels_match(json_find(sel, "matchLabels", NULL), m) || capi_deleting(m) ||
            !owned_by_remediator(m))
                return;
        if (c->n == c->cap) {
                c->cap = c->cap ? c->cap * 2 : 16;
                c->targets = xrealloc(c->targets, c->cap * sizeof(*c->targets));
        }
        c->targets[c->n++] = kube_object_ref(obj);
}

/* The node conditions to check, in either contract's shape. */
static void read_checks(struct mhc_ctx *c)
{
        const cJSON *list =
                capi_contract.v1beta2
                        ? json_find(c->mhc, "spec", "checks", "unhealthyNodeConditions", NULL)
                        : json_find(c->mhc, "spec", "unhealthyConditions", NULL);
        const cJSON *e;

        cJSON_ArrayForEach (e, list) {
                struct check *k = &c->checks[c->n_checks];
                const cJSON *secs = json_find(e, "timeoutSeconds", NULL);
                const char *dur = json_find_str(e, "timeout", NULL);
                uint64_t ms = 0;

                if (c->n_checks == MAX_CHECKS)
                        break;
                k->type = json_find_str(e, "type", NULL);
                k->status = json_find_str(e, "status", NULL);
                if (!k->type || !k->status)
                        continue;
                if (capi_contract.v1beta2)
                        k->timeout_s = cJSON_IsNumber(secs) && secs->valuedouble >= 0
                                               ? (int64_t)secs->valuedouble
                                               : 0;
                else
                        k->timeout_s =
                                dur && parse_duration_ms(dur, &ms) == 0 ? (int64_t)(ms / 1000) : 0;
                c->n_checks++;
        }
}

static void next_check(struct mhc_ctx *c, int64_t in_s)
{
        if (in_s > 0 && (c->next_s == 0 || in_s < c->next_s))
                c->next_s = in_s;
}

/* Why target m is unhealthy (static text), or NULL. */
static const char *unhealthy(struct mhc_ctx *c, const cJSON *m, char *why, size_t len)
{
        const char *node = json_find_str(m, "status", "nodeRef", "name", NULL);
        struct kube_object *n = NULL; /* looked up after the failure check (no leak) */
        const cJSON *cond, *conds = NULL;
        const char *out = NULL;

        if (!capi_contract.v1beta2 && (json_find(m, "status", "failureReason", NULL) ||
                                       json_find(m, "status", "failureMessage", NULL))) {
                (void)snprintf(why, len, "FailureReason: %s",
                               json_find_str(m, "status", "failureReason", NULL)
                                       ? json_find_str(m, "status", "failureReason", NULL)
                                       : "");
                return "MachineHasFailure";
        }
        n = node ? informer_get(c->w->s->nodes, NULL, node) : NULL;
        if (node && !n) {
                (void)snprintf(why, len, "Node %s has been deleted", node);
                return "NodeDeleted";
        }
        if (n)
                conds = json_find(kube_object_json(n), "status", "conditions", NULL);
        cJSON_ArrayForEach (cond, conds) {
                const char *type = json_find_str(cond, "type", NULL);
                const char *st = json_find_str(cond, "status", NULL);
                int64_t since = rfc3339_parse(json_find_str(cond, "lastTransitionTime", NULL));

                for (size_t i = 0; !out && type && st && i < c->n_checks; i++) {
                        const struct check *k = &c->checks[i];

                        if (strcmp(k->type, type) != 0 || strcmp(k->status, st) != 0)
                                continue;
                        if (since >= 0 && since + k->timeout_s < c->now) {
                                (void)snprintf(why, len,
                                               "Condition %s on Node is reporting status %s for "
                                               "more than %llds",
                                               type, st, (long long)k->timeout_s);
                                out = "UnhealthyNode";
                        } else {
                                next_check(c, since < 0 ? 1 : since + k->timeout_s - c->now + 1);
                        }
                }
        }
        kube_object_unref(n);
        return out;
}

/* The most unhealthy targets remediation may act with: an integer, or a percentage of the
 * targets (rounded down, as intstr.GetScaledValueFromIntOrPercent); all when unset. */
static size_t max_unhealthy(const struct mhc_ctx *c)
{
        const cJSON *v = capi_contract.v1beta2
                                 ? json_find(c->mhc, "spec", "remediation", "triggerIf",
                                             "unhealthyLessThanOrEqualTo", NULL)
                                 : json_find(c->mhc, "spec", "maxUnhealthy", NULL);
        uint64_t pct = 0;

        if (cJSON_IsNumber(v) && v->valuedouble >= 0)
                return (size_t)v->valuedouble;
        if (cJSON_IsString(v) && strlen(v->valuestring) > 1 &&
            v->valuestring[strlen(v->valuestring) - 1] == '%') {
                char *num = xstrdup(v->valuestring);

                num[strlen(num) - 1] = '\0';
                if (parse_u64(num, 0, 100, &pct) != 0)
                        pct = 100;
                free(num);
                return (size_t)(c->n * pct / 100);
        }
        return c->n;
}

/* Sets condition type on status.conditions in the contract's shape; true when it changed. */
static bool set_condition(
        cJSON *status, const char *type, const char *reason, const char *message, int64_t now)
{
        cJSON *conds = child_array(status, "conditions");
        cJSON *c = NULL, *e;
        char ts[RFC3339_LEN];

        cJSON_ArrayForEach (e, conds) {
                const char *t = json_find_str(e, "type", NULL);

                if (t && strcmp(t, type) == 0)
                        c = e;
        }
        if (c && strcmp(json_find_str(c, "status", NULL) ? json_find_str(c, "status", NULL) : "",
                        "False") == 0)
                return false;
        if (!c) {
                c = cJSON_CreateObject();
                cJSON_AddItemToArray(conds, c);
        }
        rfc3339_format((time_t)now, ts);
        json_set_string(c, "type", type);
        json_set_string(c, "status", "False");
        if (!capi_contract.v1beta2)
                json_set_string(c, "severity", "Warning");
        json_set_string(c, "reason", reason);
        json_set_string(c, "message", message);
        json_set_string(c, "lastTransitionTime", ts);
        return true;
}

/* "Kind" in lower case plus "s" (the plural of the Maas kinds and most CRDs). */
static void plural_of(const char *kind, char *out, size_t n)
{
        size_t i = 0;

        for (; kind[i] && i + 2 < n; i++)
                out[i] = (char)(kind[i] >= 'A' && kind[i] <= 'Z' ? kind[i] - 'A' + 'a' : kind[i]);
        out[i++] = 's';
        out[i] = '\0';
}

/* The MHC's remediation template reference, in the contract's shape; false when none (or
 * one capi-sim cannot read: it then remediates through the owner, and says so). */
static bool read_ext_ref(const cJSON *mhc, struct ext_ref *x)
{
        const cJSON *ref = capi_contract.v1beta2
                                   ? json_find(mhc, "spec", "remediation", "templateRef", NULL)
                                   : json_find(mhc, "spec", "remediationTemplate", NULL);
        const char *av = json_find_str(ref, "apiVersion", NULL);
        const char *kind = json_find_str(ref, "kind", NULL);
        const char *slash = av ? strchr(av, '/') : NULL;
        size_t kn = kind ? strlen(kind) : 0;

        x->name = json_find_str(ref, "name", NULL);
        if (!ref)
                return false;
        if (!x->name || !slash || kn <= strlen("Template") ||
            strcmp(kind + kn - strlen("Template"), "Template") != 0 ||
            (size_t)(slash - av) >= sizeof(x->group) || strlen(slash + 1) >= sizeof(x->version) ||
            kn >= sizeof(x->tkind)) {
                log_info(LOGGER, "unreadable remediation template reference", "mhc=%s",
                         json_find_str(mhc, "metadata", "name", NULL));
                return false;
        }
        (void)snprintf(x->group, sizeof(x->group), "%.*s", (int)(slash - av), av);
        (void)snprintf(x->version, sizeof(x->version), "%s", slash + 1);
        (void)snprintf(x->tkind, sizeof(x->tkind), "%s", kind);
        (void)snprintf(x->kind, sizeof(x->kind), "%.*s", (int)(kn - strlen("Template")), kind);
        plural_of(x->tkind, x->tplural, sizeof(x->tplural));
        plural_of(x->kind, x->plural, sizeof(x->plural));
        x->tres = (struct kube_resource){ x->group, x->version, x->tplural, x->tkind, true };
        x->res = (struct kube_resource){ x->group, x->version, x->plural, x->kind, true };
        return true;
}

/* dst[key] = a copy of every string member of src (an object), keeping dst's others. */
static void merge_strings(cJSON *dst, const cJSON *src)
{
        const cJSON *e;

        cJSON_ArrayForEach (e, src) {
                if (cJSON_IsString(e) && e->string)
                        json_set_string(dst, e->string, e->valuestring);
        }
}

/* The remediation object for Machine t from the template (CAPI's GenerateTemplate). */
static cJSON *external_object(const struct mhc_ctx *c,
                              const struct kube_object *t,
                              const cJSON *tpl)
{
        const cJSON *m = kube_object_json(t);
        const char *cluster = json_find_str(c->mhc, "spec", "clusterName", NULL);
        char *av = xasprintf("%s/%s", c->ext->group, c->ext->version);
        char *gk = xasprintf("%s.%s", c->ext->tkind, c->ext->group);
        cJSON *o = cJSON_CreateObject();
        cJSON *meta = json_child_object(o, "metadata", NULL);
        const cJSON *spec = json_find(tpl, "spec", "template", "spec", NULL);

        json_set_string(o, "apiVersion", av);
        json_set_string(o, "kind", c->ext->kind);
        json_set_string(meta, "name", kube_object_name(t));
        json_set_string(meta, "namespace", c->ns);
        merge_strings(json_child_object(meta, "labels", NULL),
                      json_find(tpl, "spec", "template", "metadata", "labels", NULL));
        if (cluster)
                json_set_string(json_child_object(meta, "labels", NULL), SCHEMA_LABEL_CLUSTER_NAME,
                                cluster);
        merge_strings(json_child_object(meta, "annotations", NULL),
                      json_find(tpl, "spec", "template", "metadata", "annotations", NULL));
        json_set_string(json_child_object(meta, "annotations", NULL), CAPI_ANN_TEMPLATE,
                        c->ext->name);
        json_set_string(json_child_object(meta, "annotations", NULL),
                        "cluster.x-k8s.io/cloned-from-groupkind", gk);
        (void)capi_set_owner(o, capi_contract.api_version, "Machine", kube_object_name(t),
                             json_find_str(m, "metadata", "uid", NULL), false);
        json_set_item(o, "spec", spec ? cJSON_Duplicate(spec, true) : cJSON_CreateObject());
        free(gk);
        free(av);
        return o;
}

/* Creates Machine t's remediation object from the template unless it exists. */
static int request_remediation(struct mhc_ctx *c, const struct kube_object *t)
{
        cJSON *tpl = NULL, *o;
        int err = kube_get(c->w->kube, &c->ext->tres, c->ns, c->ext->name, &tpl, NULL);

        if (err == CM_ENOTFOUND) {
                log_info(LOGGER, "remediation template not found", "template=%s/%s kind=%s", c->ns,
                         c->ext->name, c->ext->tkind);
                return 0; /* CAPI: ExternalRemediationTemplateAvailable False, no request */
        }
        if (err)
                return err;
        o = external_object(c, t, tpl);
        err = capi_create(c->w->kube, &c->ext->res, c->ns, o, NULL);
        if (err == 0)
                log_info(LOGGER, "external remediation requested", "machine=%s/%s kind=%s", c->ns,
                         kube_object_name(t), c->ext->kind);
        cJSON_Delete(o);
        cJSON_Delete(tpl);
        return err;
}

static bool condition_false(const cJSON *m, const char *type)
{
        const cJSON *e;

        cJSON_ArrayForEach (e, json_find(m, "status", "conditions", NULL)) {
                const char *t = json_find_str(e, "type", NULL);
                const char *st = json_find_str(e, "status", NULL);

                if (t && st && strcmp(t, type) == 0)
                        return strcmp(st, "False") == 0;
        }
        return false;
}

/* A Machine this MHC remediated externally is healthy again: its remediation object goes
 * (CAPI deletes it) and MachineHealthCheckSucceeded is True again. */
static int healthy_again(struct mhc_ctx *c, const struct kube_object *t)
{
        const cJSON *m = kube_object_json(t);
        cJSON *after, *conds, *e;
        char ts[RFC3339_LEN];
        int err;

        if (!condition_false(m, "MachineHealthCheckSucceeded"))
                return 0;
        err = capi_delete(c->w->kube, &c->ext->res, c->ns, kube_object_name(t));
        if (err)
                return err;
        after = cJSON_Duplicate(m, true);
        conds = cJSON_GetObjectItemCaseSensitive(json_child_object(after, "status", NULL),
                                                 "conditions");
        rfc3339_format((time_t)c->now, ts);
        for (e = conds ? conds->child : NULL; e;) {
                cJSON *next = e->next;
                const char *type = json_find_str(e, "type", NULL);

                if (type && strcmp(type, "ExternallyRemediated") == 0) {
                        cJSON_DetachItemViaPointer(conds, e);
                        cJSON_Delete(e);
                } else if (type && strcmp(type, "MachineHealthCheckSucceeded") == 0) {
                        json_set_string(e, "status", "True");
                        json_set_string(e, "reason", "Succeeded");
                        json_set_string(e, "message", "");
                        json_set_string(e, "lastTransitionTime", ts);
                        cJSON_DeleteItemFromObjectCaseSensitive(e, "severity");
                }
                e = next;
        }
        err = capi_write(c->w, &CAPI_RES_MACHINES, m, after);
        if (err == 0)
                log_info(LOGGER, "machine healthy again", "machine=%s/%s", c->ns,
                         kube_object_name(t));
        cJSON_Delete(after);
        return err;
}

static int mark(struct mhc_ctx *c, const struct kube_object *t, const char *reason, const char *why)
{
        cJSON *after = cJSON_Duplicate(kube_object_json(t), true);
        cJSON *st = json_child_object(after, "status", NULL);
        char msg[512];
        bool changed;
        int err = 0;

        (void)snprintf(msg, sizeof(msg), "Health check failed: %s", why);
        changed = set_condition(st, "MachineHealthCheckSucceeded", reason, msg, c->now);
        if (!c->ext)
                changed = set_condition(st, "OwnerRemediated", "WaitingForRemediation",
                                        "Waiting for remediation", c->now) ||
                          changed;
        else if (capi_contract.v1beta2)
                changed = set_condition(st, "ExternallyRemediated", "WaitingForRemediation",
                                        "Waiting for remediation", c->now) ||
                          changed;
        if (c->ext)
                err = request_remediation(c, t);
        if (changed && err == 0) {
                err = capi_write(c->w, &CAPI_RES_MACHINES, kube_object_json(t), after);
                if (err == 0)
                        log_info(LOGGER, "machine marked unhealthy", "machine=%s/%s reason=%s %s",
                                 c->ns, kube_object_name(t), reason, why);
        }
        cJSON_Delete(after);
        return err;
}

static int write_status(struct mhc_ctx *c, size_t healthy, size_t allowed)
{
        cJSON *after = cJSON_Duplicate(c->mhc, true);
        cJSON *st = json_child_object(after, "status", NULL);
        int err;

        json_set_int64(st, "expectedMachines", (int64_t)c->n);
        json_set_int64(st, "currentHealthy", (int64_t)healthy);
        json_set_int64(st, "remediationsAllowed", (int64_t)allowed);
        err = capi_write(c->w, &CAPI_RES_MHCS, c->mhc, after);
        cJSON_Delete(after);
        return err;
}

int capi_mhc_reconcile(struct capi_worker *w,
                       const char *ns,
                       const char *name,
                       struct reconcile_result *res)
{
        struct kube_object *mhc = informer_get(w->s->mhcs, ns, name), *cl = NULL;
        struct mhc_ctx c = { .w = w, .ns = ns, .now = (int64_t)time(NULL) };
        struct ext_ref ext;
        uint64_t started = monotonic_ms();
        const char **reasons = NULL;
        char(*whys)[256] = NULL;
        size_t bad = 0, max;
        const char *cluster;
        int err = 0;

        if (!mhc || capi_deleting(kube_object_json(mhc)))
                goto out;
        c.mhc = kube_object_json(mhc);
        cluster = json_find_str(c.mhc, "spec", "clusterName", NULL);
        cl = cluster ? informer_get(w->s->clusters, ns, cluster) : NULL;
        if (!cl || capi_paused(kube_object_json(cl)))
                goto out; /* as CAPI's: nothing for a missing or paused Cluster */
        read_checks(&c);
        c.ext = read_ext_ref(c.mhc, &ext) ? &ext : NULL;
        (void)informer_each(w->s->machines, ns, cluster, keep_target, &c);
        reasons = c.n ? xcalloc(c.n, sizeof(*reasons)) : NULL;
        whys = c.n ? xcalloc(c.n, sizeof(*whys)) : NULL;
        for (size_t i = 0; i < c.n; i++) {
                reasons[i] =
                        unhealthy(&c, kube_object_json(c.targets[i]), whys[i], sizeof(whys[i]));
                bad += reasons[i] != NULL;
        }
        max = max_unhealthy(&c);
        for (size_t i = 0; bad <= max && i < c.n && err == 0; i++)
                if (reasons[i])
                        err = mark(&c, c.targets[i], reasons[i], whys[i]);
        for (size_t i = 0; c.ext && i < c.n && err == 0; i++)
                if (!reasons[i])
                        err = healthy_again(&c, c.targets[i]);
        if (bad > max)
                log_info(LOGGER, "remediation short-circuited", "mhc=%s/%s unhealthy=%zu max=%zu",
                         ns, name, bad, max);
        if (err == 0)
                err = write_status(&c, c.n - bad, bad <= max ? max - bad : 0);
        if (err == 0 && c.next_s > 0)
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER,
                                                  (uint64_t)c.next_s * 1000 };
out:
        kube_object_list_free(c.targets, c.n);
        free(reasons);
        free(whys);
        kube_object_unref(cl);
        kube_object_unref(mhc);
        last_pass_ms = monotonic_ms() - started;
        return err;
}
