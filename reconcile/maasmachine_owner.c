/*
 * maasmachine_owner: whether the MAAS machine a MaasMachine names is still held for it (the
 * stamp decides), and what a provisioned MaasMachine does when its host is lost: it reports
 * a terminal failure for Cluster API to replace the Machine, and never takes another host
 * under the same providerID (issue 25; upstream-capmaas.md §3.5 failureReason).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_steps.h"
#include "metrics.h"
#include "xalloc.h"

#define LOGGER MAASMACHINE_LOGGER

/* The value of a string key of the machine's owner_data, or NULL. */
static const char *owner_data(const struct maas_node *n, const char *key)
{
        const cJSON *v =
                n->owner_data ? cJSON_GetObjectItemCaseSensitive(n->owner_data, key) : NULL;

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

void maasmachine_stamp_owner_data(struct maasmachine_ctx *c, const char *sid)
{
        const char *keys[] = { "capmaas-cluster", "capmaas-namespace", "capmaas-machine" };
        const char *vals[] = { kube_object_name(c->cluster), c->ns, c->name };
        struct maas_error me = { 0 };
        int err;

        err = maas_set_owner_data(c->w->maas, sid, keys, vals, 3, NULL, &me);
        reconciler_maas_count(c->p, "set_owner_data", err, &me);
        if (err)
                log_warn(MAASMACHINE_LOGGER, "cannot set owner data", "system_id=%s error=%s", sid,
                         maas_strerror(err));
        maas_error_release(&me);
}

/* True when MAAS lists system_id among the machines stamped with our UID (agent_name). */
static int stamped_with_uid(struct maasmachine_ctx *c, const char *system_id, bool *ret)
{
        const char *ids[] = { system_id };
        struct maas_node_filter f = { .ids = ids, .n_ids = 1, .agent_name = c->mm.meta.uid };
        struct maas_node_list l = { 0 };
        struct maas_error me = { 0 };
        int err;

        *ret = false;
        err = maas_list_machines(c->w->maas, &f, &l, &me);
        reconciler_maas_count(c->p, "list_machines", err, &me);
        maas_error_release(&me);
        for (size_t i = 0; err == 0 && i < l.n; i++)
                if (l.items[i].system_id && strcmp(l.items[i].system_id, system_id) == 0)
                        *ret = true;
        maas_node_list_release(&l);
        return err;
}

int maasmachine_owned(struct maasmachine_ctx *c, bool *ret_owned)
{
        const struct maas_node *n = &c->node;
        const char *machine = owner_data(n, "capmaas-machine");
        const char *ns = owner_data(n, "capmaas-namespace");
        bool stamped = false;
        int err;

        *ret_owned = false;
        if (!n->owner || !*n->owner)
                return 0; /* released: nobody holds it */
        if (machine || ns) {
                *ret_owned =
                        machine && ns && strcmp(machine, c->name) == 0 && strcmp(ns, c->ns) == 0;
                return 0;
        }
        /* No owner data (its write is best effort): the agent_name stamp of the allocation. */
        if (c->mm.meta.uid) {
                err = stamped_with_uid(c, n->system_id, &stamped);
                if (err)
                        return err;
        }
        /* Ours by agent_name but the owner data is missing (its write failed): write it now,
         * so the question is settled without a list next time, and after a clusterctl move
         * too (which gives the MaasMachine a new UID). */
        if (stamped && c->cluster && !c->mm.meta.deletion_timestamp)
                maasmachine_stamp_owner_data(c, n->system_id);
        /* A MaasMachine capmaas allocated for carries the deploy-started annotation and its
         * machine the stamp; one without (allocated by the reference provider before capmaas
         * took over) cannot be told apart by stamp and stays ours, as the reference kept it. */
        *ret_owned = stamped || !schema_strmap_get(&c->mm.meta.annotations,
                                                   RECONCILER_ANNOTATION_DEPLOY_STARTED);
        return 0;
}

bool maasmachine_provisioned(const struct maasmachine_ctx *c)
{
        const char *ours = c->mm.spec.provider_id;
        const char *theirs =
                c->machine ? json_find_str(kube_object_json(c->machine), "spec", "providerID", NULL)
                           : NULL;

        if (c->mm.status.provisioned || c->mm.status.ready)
                return true;
        /* Cluster API copied our providerID into the Machine: it is consumed. */
        return ours && theirs && strcmp(ours, theirs) == 0;
}

bool maasmachine_terminal(const struct maasmachine_ctx *c)
{
        return c->mm.status.failure_reason && *c->mm.status.failure_reason &&
               maasmachine_provisioned(c);
}

/* What MAAS says about the host, for the condition, the event and the metric label. */
static const char *lost_reason(const struct maasmachine_ctx *c, char *what, size_t len)
{
        const struct maas_node *n = &c->node;
        const char *st = n->status_name ? n->status_name : "";

        if (!c->have_node) {
                (void)snprintf(what, len, "no longer exists in MAAS");
                return "NotFound";
        }
        if (strcmp(st, "Broken") == 0) {
                (void)snprintf(what, len, "is Broken in MAAS");
                return "Broken";
        }
        if (n->owner && *n->owner &&
            (strcmp(st, "Allocated") == 0 || strcmp(st, "Deployed") == 0 ||
             strcmp(st, "Deploying") == 0)) {
                (void)snprintf(what, len, "is %s to %s, no longer held for this MaasMachine", st,
                               n->owner);
                return "OtherOwner";
        }
        if (strcmp(st, "Commissioning") == 0 || strcmp(st, "Testing") == 0) {
                (void)snprintf(what, len, "is %s in MAAS (recommissioned)", st);
                return "Recommissioned";
        }
        (void)snprintf(what, len, "is %s in MAAS%s", st,
                       n->owner && *n->owner ? "" : " with no owner (released)");
        return "Released";
}

int maasmachine_host_lost(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        struct maas_machine_status *st = &c->mm.status;
        const char *sid = c->mm.spec.system_id ? c->mm.spec.system_id
                                               : (c->have_node ? c->node.system_id : "");
        const char *host = c->have_node && c->node.hostname ? c->node.hostname
                                                            : (st->hostname ? st->hostname : "");
        bool first = !st->failure_reason;
        char what[256];
        const char *reason = lost_reason(c, what, sizeof(what));

        (void)res;           /* terminal: no requeue; Cluster API deletes the Machine */
        if (!c->have_node) { /* MAAS has no state for it */
                free(st->machine_state);
                st->machine_state = NULL;
                st->machine_powered = false;
                st->has_machine_powered = true;
        }
        st->present = true;
        st->ready = false;
        st->has_ready = true;
        st->provisioned = true; /* it was, or it would not be lost; never reset */
        st->has_provisioned = true;
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_MACHINE_TERMINATED,
                        "MAAS machine %s (%s) %s: the host is lost; Cluster API must replace "
                        "this Machine (a MachineHealthCheck does)",
                        sid, host, what);
        if (!first)
                return 0;
        st->failure_reason = xstrdup("UpdateError");
        free(st->failure_message);
        st->failure_message = xasprintf("MAAS machine %s (%s) %s", sid, host, what);
        reconciler_event(c->p, c->cur, "Warning",
                         strcmp(reason, "NotFound") == 0 ? "MachineNotFound"
                                                         : "MachineUnexpectedTermination",
                         "MAAS machine %s (%s) %s; the Machine must be replaced, capmaas will "
                         "not deploy another host under it",
                         sid, host, what);
        if (c->p->hosts_lost)
                metric_counter_inc(metric_series(c->p->hosts_lost, reason));
        log_warn(LOGGER, "host lost", "object=%s/%s system_id=%s hostname=%s reason=%s", c->ns,
                 c->name, sid, host, reason);
        return 0;
}
