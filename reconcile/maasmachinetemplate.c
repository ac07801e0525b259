/*
 * maasmachinetemplate: status.capacity and status.nodeInfo of a MaasMachineTemplate from the
 * MAAS inventory (see maasmachinetemplate.h).
 */
#include "maasmachinetemplate.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "maas_identity.h"
#include "maasmachine_reuse.h"
#include "reconciler.h"
#include "rfc3339.h"
#include "worker.h"

#define LOGGER "maasmachinetemplate"

void mmt_memory_quantity(int64_t mib, char *out, size_t len)
{
        static const char *const units[] = { "Mi", "Gi", "Ti", "Pi" };
        size_t u = 0;

        if (mib <= 0) {
                (void)snprintf(out, len, "0");
                return;
        }
        while (u + 1 < ARRAY_SIZE(units) && mib % 1024 == 0) {
                mib /= 1024;
                u++;
        }
        (void)snprintf(out, len, "%" PRId64 "%s", mib, units[u]);
}

const char *mmt_node_architecture(const char *maas_arch)
{
        static const struct {
                const char *maas, *node;
        } map[] = { { "amd64", "amd64" },
                    { "arm64", "arm64" },
                    { "s390x", "s390x" },
                    { "ppc64el", "ppc64le" } };

        size_t n;

        if (!maas_arch)
                return NULL;
        n = strcspn(maas_arch, "/");
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (strlen(map[i].maas) == n && strncmp(maas_arch, map[i].maas, n) == 0)
                        return map[i].node;
        return NULL;
}

/* The operating system a machine deployed with image runs: MAAS's windows/ images, else
 * linux (ubuntu/, centos/, rhel/, custom images). */
static const char *operating_system(const char *image)
{
        return image && strncmp(image, "windows/", 8) == 0 ? "windows" : "linux";
}

/* Sets the one condition this controller owns, as metav1.Condition: lastTransitionTime
 * kept unless the status changes. */
static void set_condition(cJSON *status,
                          const char *cstatus,
                          const char *reason,
                          const char *message,
                          int64_t generation,
                          time_t now)
{
        cJSON *list = cJSON_GetObjectItemCaseSensitive(status, "conditions");
        cJSON *cond = NULL, *it;
        char ts[RFC3339_LEN];
        const char *old_status;

        if (!cJSON_IsArray(list)) {
                list = cJSON_CreateArray();
                json_set_item(status, "conditions", list);
        }
        cJSON_ArrayForEach (it, list) {
                const char *t = json_find_str(it, "type", NULL);

                if (t && strcmp(t, MMT_COND_CAPACITY_KNOWN) == 0) {
                        cond = it;
                        break;
                }
        }
        if (!cond) {
                cond = cJSON_CreateObject();
                json_set_string(cond, "type", MMT_COND_CAPACITY_KNOWN);
                cJSON_AddItemToArray(list, cond);
        }
        old_status = json_find_str(cond, "status", NULL);
        if (!old_status || strcmp(old_status, cstatus) != 0 ||
            !json_find_str(cond, "lastTransitionTime", NULL)) {
                rfc3339_format(now, ts);
                json_set_string(cond, "lastTransitionTime", ts);
        }
        json_set_string(cond, "status", cstatus);
        json_set_int64(cond, "observedGeneration", generation);
        json_set_string(cond, "reason", reason);
        json_set_string(cond, "message", message);
}

/* What the template asks MAAS for, in words, for the False message. */
static void describe(const struct maas_machine_spec *sp, char *out, size_t len)
{
        size_t k = 0;

        k += (size_t)snprintf(out, len, "pool=%s zone=%s",
                              sp->resource_pool && *sp->resource_pool ? sp->resource_pool : "any",
                              sp->failure_domain && *sp->failure_domain ? sp->failure_domain
                                                                        : "any");
        for (size_t i = 0; i < sp->tags.n && k < len; i++)
                k += (size_t)snprintf(out + k, len - k, "%s%s",
                                      i ? "," : " tags=", sp->tags.items[i]);
        if (k < len)
                (void)snprintf(out + k, len - k, " minCPU=%" PRId64 " minMemory=%" PRId64 "MiB",
                               sp->has_min_cpu ? sp->min_cpu : 0,
                               sp->has_min_memory ? sp->min_memory : 0);
}

static struct maas_inv_query query_of(const struct maas_machine_spec *sp)
{
        return (struct maas_inv_query){
                .pool = sp->resource_pool && *sp->resource_pool ? sp->resource_pool : NULL,
                .zone = sp->failure_domain && *sp->failure_domain ? sp->failure_domain : NULL,
                .tags = (const char *const *)sp->tags.items,
                .n_tags = sp->tags.n,
                .min_cpu = sp->has_min_cpu ? sp->min_cpu : 0,
                .min_memory_mib = sp->has_min_memory ? sp->min_memory : 0,
        };
}

void maasmachinetemplate_status(const struct maas_machine_spec *spec,
                                const struct maas_inventory_snapshot *s,
                                cJSON *status,
                                int64_t generation,
                                time_t now)
{
        struct maas_inv_query q = query_of(spec);
        struct maas_inv_fit f;
        char mem[32], msg[512], want[384];
        cJSON *cap, *info;
        const char *arch;

        maas_inv_fit(s, &q, &f);
        if (f.fit == 0) {
                cJSON_DeleteItemFromObjectCaseSensitive(status, "capacity");
                cJSON_DeleteItemFromObjectCaseSensitive(status, "nodeInfo");
                describe(spec, want, sizeof(want));
                (void)snprintf(msg, sizeof(msg),
                               "no MAAS machine matches the template (%s): the autoscaler "
                               "cannot scale it from zero",
                               want);
                set_condition(status, SCHEMA_CONDITION_FALSE, MMT_REASON_NO_MATCHING, msg,
                              generation, now);
                return;
        }
        mmt_memory_quantity(f.min_fit_memory_mib, mem, sizeof(mem));
        cap = cJSON_CreateObject();
        (void)snprintf(msg, sizeof(msg), "%d", f.min_fit_cpu);
        json_set_string(cap, "cpu", msg);
        json_set_string(cap, "memory", mem);
        json_set_item(status, "capacity", cap);
        info = cJSON_CreateObject();
        arch = mmt_node_architecture(f.fit_architecture);
        if (arch)
                json_set_string(info, "architecture", arch);
        json_set_string(info, "operatingSystem", operating_system(spec->image));
        json_set_item(status, "nodeInfo", info);
        (void)snprintf(msg, sizeof(msg),
                       "%zu MAAS machine%s match%s; the smallest has %d CPUs and %s of memory",
                       f.fit, f.fit == 1 ? "" : "s", f.fit == 1 ? "es" : "", f.min_fit_cpu, mem);
        set_condition(status, SCHEMA_CONDITION_TRUE, MMT_REASON_MACHINES_MATCH, msg, generation,
                      now);
}

/* The template's spec.template.spec, decoded; false (logged) when it does not decode. */
static bool decode_spec(const cJSON *obj, struct maas_machine_template *t)
{
        if (maas_machine_template_decode(obj, t, NULL) == 0)
                return true;
        log_warn(LOGGER, "cannot decode the MaasMachineTemplate", "object=%s/%s",
                 json_find_str(obj, "metadata", "namespace", NULL),
                 json_find_str(obj, "metadata", "name", NULL));
        return false;
}

static int write_status(struct reconciler_worker *w,
                        const cJSON *obj,
                        const struct maas_machine_template *t,
                        const struct maas_inventory_snapshot *s)
{
        cJSON *cur = cJSON_Duplicate(obj, true);
        cJSON *after = cJSON_Duplicate(obj, true);
        int err;

        maasmachinetemplate_status(&t->spec, s, json_child_object(after, "status", NULL),
                                   t->meta.has_generation ? t->meta.generation : 0,
                                   (time_t)clock_wall_s(w->p->clock));
        err = reconciler_write(w, &KUBE_RES_MAASMACHINETEMPLATES, &cur, after, false, NULL);
        cJSON_Delete(cur);
        return err;
}

int maasmachinetemplate_reconcile(void *wctx,
                                  const char *ns,
                                  const char *name,
                                  struct reconcile_result *res)
{
        struct reconciler_worker *w = wctx;
        struct maas_machine_template t;
        struct maas_inventory_snapshot *s = NULL;
        enum maas_inv_state st = MAAS_INV_NOT_LOADED;
        struct kube_object *obj;
        const cJSON *o;
        char *ident = NULL;
        int err = 0;

        (void)res; /* the next inventory refresh or template event comes back */
        obj = w->p->templates ? informer_get(w->p->templates, ns, name) : NULL;
        if (!obj || !w->p->inventory)
                goto out;
        o = kube_object_json(obj);
        if (json_find_str(o, "metadata", "deletionTimestamp", NULL) ||
            reconciler_pause_cause(NULL, o))
                goto out;
        maasmachine_reuse_sweep(w); /* the kept hosts' hold time, once per refresh at most */
        /* a template of a cluster with its own MAAS (spec.identityRef) gets its capacity from
         * that MAAS's inventory, never from another region's machines */
        ident = maas_ident_of_cluster(
                w->p->idents, ns,
                json_find_str(o, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL));
        if (ident) {
                maasmachine_reuse_sweep_ident(w, ns, ident); /* that MAAS's kept hosts too */
                s = reconciler_ident_inventory(w->p, ns, ident);
                st = s ? MAAS_INV_OK : MAAS_INV_NOT_LOADED;
        } else {
                s = maas_inventory_acquire(w->p->inventory, &st, NULL);
        }
        /* A stale or failed inventory keeps what was last written: a guess is worse. */
        if (!s || st != MAAS_INV_OK || !decode_spec(o, &t))
                goto out;
        err = write_status(w, o, &t, s);
        if (err)
                log_info(LOGGER, "reconcile failed", "object=%s/%s error=%s", ns, name,
                         cm_strerror(err));
        maas_machine_template_release(&t);
out:
        free(ident);
        maas_inventory_snapshot_release(s);
        kube_object_unref(obj);
        return err;
}
