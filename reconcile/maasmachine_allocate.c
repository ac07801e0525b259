/*
 * maasmachine_allocate: getting a MAAS machine for a MaasMachine: find the one it names (or
 * adopt one stamped with its UID, releasing any double), allocate with every constraint,
 * and replace a machine whose deploy failed or timed out (upstream-capmaas.md §3.5;
 * beyond.md B2, B3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fleet_snapshot.h"
#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_reuse.h"
#include "maasmachine_steps.h"
#include "metrics.h"
#include "xalloc.h"

/* --- finding the machine --------------------------------------------------------------- */

static bool adoptable(const char *status)
{
        static const char *const ok[] = { "Allocated", "Deploying", "Deployed",
                                          "Failed deployment" };

        for (size_t i = 0; status && i < sizeof(ok) / sizeof(ok[0]); i++)
                if (strcmp(ok[i], status) == 0)
                        return true;
        return false;
}

/* Looks for machines stamped with our UID (B2). Adopts the first usable one other than
 * `skip`; releases any further stamped machine (a double allocation must not survive). */
static int adopt(struct maasmachine_ctx *c, const char *skip)
{
        struct maas_node_list l = { 0 };
        struct maas_error me = { 0 };
        int err;

        bool none = false;

        if (!c->mm.meta.uid)
                return 0;
        /* the usual case, a MaasMachine never allocated for: one shared list says so */
        if (!skip && !c->have_node) {
                err = fleet_snapshot_none_stamped(c->w, c->mm.meta.uid, c->ns, c->name, &none,
                                                  &c->unplaced_later);
                if (err || none || c->unplaced_later)
                        return err;
        }
        err = maas_list_machines(
                c->w->maas, &(struct maas_node_filter){ .agent_name = c->mm.meta.uid }, &l, &me);
        reconciler_maas_count(c->p, "list_machines", err, &me);
        maas_error_release(&me);
        if (err)
                return err;
        for (size_t i = 0; i < l.n; i++) {
                struct maas_node *n = &l.items[i];

                if (!adoptable(n->status_name) || (skip && strcmp(n->system_id, skip) == 0))
                        continue;
                if (!c->have_node) {
                        log_info(MAASMACHINE_LOGGER,
                                 "adopting the MAAS machine stamped with this MaasMachine",
                                 "object=%s/%s system_id=%s", c->ns, c->name, n->system_id);
                        maasmachine_set_ids(c, n->zone, n->system_id);
                        maasmachine_take_node(c, n);
                        continue;
                }
                log_warn(MAASMACHINE_LOGGER,
                         "releasing a second machine stamped with this MaasMachine",
                         "object=%s/%s system_id=%s", c->ns, c->name, n->system_id);
                (void)!maasmachine_release(c, n->system_id);
        }
        maas_node_list_release(&l);
        return 0;
}

static const char *current_system_id(const struct maasmachine_ctx *c)
{
        if (c->mm.spec.system_id && *c->mm.spec.system_id)
                return c->mm.spec.system_id;
        return c->mm.spec.provider_id ? schema_provider_id_system_id(c->mm.spec.provider_id) : NULL;
}

static bool steady(const struct maasmachine_ctx *c)
{
        return c->mm.status.ready && c->mm.status.machine_state &&
               strcmp(c->mm.status.machine_state, "Deployed") == 0;
}

int maasmachine_find_node(struct maasmachine_ctx *c)
{
        const char *sid = current_system_id(c);
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        int err = CM_ENOTFOUND;

        /* The fleet snapshot may be a refresh interval old: fine for noticing drift at
         * steady state, never for deciding a release. A machine in flight reads the
         * in-flight list (a few seconds old at most), a deleting one the deleting list
         * (fetched after the deletion was seen, about a second old at most); a GET only
         * confirms one a list lacks. */
        if (sid && steady(c) && !c->mm.meta.deletion_timestamp)
                err = fleet_snapshot_lookup(c->w, sid, &n);
        else if (sid && fleet_snapshot_in_flight(kube_object_json(c->obj)))
                err = fleet_snapshot_lookup_inflight(c->w, sid, &n, &c->list_later);
        else if (sid && c->mm.meta.deletion_timestamp && c->mm.spec.system_id &&
                 strcmp(sid, c->mm.spec.system_id) == 0)
                err = fleet_snapshot_lookup_deleting(c->w, sid, &n, &c->list_later);
        if (c->list_later)
                return 0; /* the next in-flight list answers it */
        if (sid && err == CM_ENOTFOUND) {
                err = maas_get_machine(c->w->maas, sid, &n, &me);
                reconciler_maas_count(c->p, "get_machine", err, &me);
        }
        maas_error_release(&me);
        if (sid && err == 0) {
                maasmachine_take_node(c, &n);
                return 0;
        }
        if (sid && err != CM_ENOTFOUND)
                return err;
        /* Gone after provisioning: the caller reports it lost, nothing is adopted under the
         * providerID Cluster API already holds. */
        if (sid && !c->mm.meta.deletion_timestamp && maasmachine_provisioned(c))
                return 0;
        if (sid && !c->mm.meta.deletion_timestamp) {
                reconciler_event(c->p, c->cur, "Warning", "MachineNotFound",
                                 "MAAS machine %s no longer exists; allocating another", sid);
        }
        /* A deleting MaasMachine keeps its ids (a provisioned one's providerID is immutable). */
        if (sid && !c->mm.meta.deletion_timestamp)
                maasmachine_set_ids(c, NULL, NULL);
        return adopt(c, NULL);
}

/* --- allocate ---------------------------------------------------------------------------- */

/* The zone to allocate in: the Machine's spec.failureDomain (where Cluster API placed it, e.g.
 * a KubeadmControlPlane spreading its machines), else the MaasMachine's own (copied from its
 * template), else any. */
static const char *zone_of(const struct maasmachine_ctx *c)
{
        const char *placed = capi_machine_failure_domain(kube_object_json(c->machine));

        if (placed)
                return placed;
        if (c->mm.spec.failure_domain && *c->mm.spec.failure_domain)
                return c->mm.spec.failure_domain;
        return NULL;
}

static void describe_constraints(const struct maasmachine_ctx *c, char *out, size_t len)
{
        const struct maas_machine_spec *s = &c->mm.spec;
        size_t k = 0;

        k += (size_t)snprintf(out, len, "minCPU=%lld minMemory=%lldMB",
                              (long long)(s->has_min_cpu ? s->min_cpu : 0),
                              (long long)(s->has_min_memory ? s->min_memory : 0));
        if (s->resource_pool && k < len)
                k += (size_t)snprintf(out + k, len - k, " pool=%s", s->resource_pool);
        if (zone_of(c) && k < len)
                k += (size_t)snprintf(out + k, len - k, " zone=%s", zone_of(c));
        for (size_t i = 0; i < s->tags.n && k < len; i++)
                k += (size_t)snprintf(out + k, len - k, "%s%s",
                                      i ? "," : " tags=", s->tags.items[i]);
        for (size_t i = 0; i < s->exclude_tags.n && k < len; i++)
                k += (size_t)snprintf(out + k, len - k, "%s%s",
                                      i ? "," : " excludeTags=", s->exclude_tags.items[i]);
        if (s->architecture && k < len)
                k += (size_t)snprintf(out + k, len - k, " architecture=%s", s->architecture);
        if (s->has_min_disk_size && s->min_disk_size > 0 && k < len)
                (void)snprintf(out + k, len - k, " minDiskSize=%lldGB",
                               (long long)s->min_disk_size);
}

static int allocate_failed(struct maasmachine_ctx *c,
                           int err,
                           const struct maas_error *me,
                           struct reconcile_result *res)
{
        char what[384];

        describe_constraints(c, what, sizeof(what));
        if (err == MAAS_ENOMATCH) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                                "no free MAAS machine matches %s; retrying", what);
                reconciler_event(c->p, c->cur, "Warning", "NoMachineAvailable",
                                 "no free MAAS machine matches %s", what);
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = 60000;
                return 0;
        }
        if (me->message && strstr(me->message, "Invalid transition: Broken")) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_MACHINE_DEPLOYING, "retrying after broken machine");
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = 120000;
                return 0;
        }
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_MACHINE_DEPLOY_FAILED, "unable to allocate a machine: %s",
                        me->message ? me->message : maas_strerror(err));
        return err;
}

int maasmachine_allocate(struct maasmachine_ctx *c, struct reconcile_result *res, bool *ret_got)
{
        const struct maas_machine_spec *s = &c->mm.spec;
        char *comment = xasprintf("capmaas %s/%s", c->ns, c->name);
        char *storage = s->has_min_disk_size && s->min_disk_size > 0
                                ? xasprintf("%lld", (long long)s->min_disk_size)
                                : NULL;
        char *pinned = NULL;
        char started[32];
        struct maas_allocate_opts o = {
                .cpu_count = s->has_min_cpu ? (double)s->min_cpu : 0,
                .mem_mib = s->has_min_memory ? (double)s->min_memory : 0,
                .zone = zone_of(c),
                .pool = s->resource_pool,
                .agent_name = c->mm.meta.uid,
                .comment = comment,
                .tags = (const char *const *)s->tags.items,
                .n_tags = s->tags.n,
                .not_tags = (const char *const *)s->exclude_tags.items,
                .n_not_tags = s->exclude_tags.n,
                .arch = s->architecture,
                .storage = storage,
        };
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        enum maasmachine_reuse_outcome reuse = MAASMACHINE_REUSE_NONE;
        char **excluded = NULL;
        size_t n_excluded = 0;
        int err;

        *ret_got = false;
        err = maasmachine_reuse_allocate(c, &o, &n, res, &reuse); /* a kept host first */
        if (err || reuse == MAASMACHINE_REUSE_WAIT)
                goto out;
        if (reuse == MAASMACHINE_REUSE_GOT)
                goto allocated;
        excluded = maasmachine_reuse_exclude(c, &o, &n_excluded); /* hosts kept for others */
        err = maasmachine_storage_layout(c, &o, res, &pinned);
        if (err == MAAS_ENOMATCH) {
                err = allocate_failed(c, err, &me, res);
                goto out;
        }
        if (err || (s->storage_layout && s->storage_layout->type && !pinned))
                goto out;
        o.system_id = pinned;
        if (c->mm.meta.uid) /* from now on only a list by its UID can tell what MAAS did */
                fleet_snapshot_allocating(c->p, c->mm.meta.uid);
        err = maas_allocate(c->w->maas, &o, &n, &me);
        reconciler_maas_count(c->p, "allocate", err, &me);
        /* only kept hosts are left, or a kept host's tag is gone from MAAS (400) */
        if ((err == MAAS_ENOMATCH || (err && me.cls == MAAS_ERR_VALIDATION)) && excluded &&
            !pinned) {
                o.not_tags = (const char *const *)s->exclude_tags.items;
                o.n_not_tags = s->exclude_tags.n;
                maas_error_release(&me);
                err = maas_allocate(c->w->maas, &o, &n, &me);
                reconciler_maas_count(c->p, "allocate", err, &me);
        }
        if (err == MAAS_ENOMATCH && pinned) { /* taken since the dry run: pick again */
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = 1000;
                err = 0;
                goto out;
        }
        if (err) {
                err = allocate_failed(c, err, &me, res);
                goto out;
        }
allocated:
        maasmachine_reuse_count(c->p, reuse == MAASMACHINE_REUSE_GOT);
        maasmachine_stamp_owner_data(c, n.system_id);
        maasmachine_set_ids(c, n.zone, n.system_id);
        (void)snprintf(started, sizeof(started), "%lld", (long long)c->now);
        maasmachine_set_annotation(c, RECONCILER_ANNOTATION_DEPLOY_STARTED, started);
        reconciler_event(c->p, c->cur, "Normal", "MachineAllocated",
                         "Allocated MAAS machine %s (%s) in zone %s", n.system_id,
                         n.hostname ? n.hostname : "", n.zone ? n.zone : "");
        maasmachine_take_node(c, &n);
        *ret_got = true;
        /* Persist the providerID before anything else happens to the machine. */
        err = maasmachine_flush(c, true);
out:
        maasmachine_reuse_exclude_free(excluded, n_excluded);
        maas_node_release(&n);
        maas_error_release(&me);
        free(pinned);
        free(storage);
        free(comment);
        return err;
}

/* --- replace ---------------------------------------------------------------------------- */

int maasmachine_replace(struct maasmachine_ctx *c, const char *why, struct reconcile_result *res)
{
        char *old;
        bool got = false;
        int err;

        if (maasmachine_is_vm(c) && maasmachine_node_is_vm(&c->node)) /* deleted, composed anew */
                return maasmachine_vm_replace(c, why, res);
        old = xstrdup(c->node.system_id);
        if (c->p->replaced)
                metric_counter_inc(metric_series(c->p->replaced, why));
        reconciler_deploy_failed(c->p, why);
        maasmachine_drop_node(c);
        /* Allocate the replacement while still holding the failed machine, so MAAS cannot
         * hand the same one back. */
        err = adopt(c, old);
        if (err == 0 && !c->have_node)
                err = maasmachine_allocate(c, res, &got);
        if (maasmachine_release(c, old) == 0)
                reconciler_event(c->p, c->cur, "Warning", "MachineReplaced",
                                 "MAAS machine %s: %s; released it%s%s", old,
                                 strcmp(why, RECONCILER_DEPLOY_TIMEOUT) == 0
                                         ? "deploy deadline passed"
                                         : "deployment failed",
                                 c->have_node ? " and allocated " : "",
                                 c->have_node ? c->node.system_id : "");
        if (!c->have_node) {
                maasmachine_set_ids(c, NULL, NULL);
                free(old);
                return err;
        }
        free(old);
        if (err)
                return err;
        err = maasmachine_network_apply(c, res, &got);
        if (err || !got) /* the static address: refused, or still on the released host */
                return err;
        err = maasmachine_deploy(c);
        if (err == 0) {
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = 1000;
        }
        return err;
}
