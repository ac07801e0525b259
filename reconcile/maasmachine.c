/*
 * maasmachine: the MaasMachine reconciler (upstream-capmaas.md §3.5, improved per
 * beyond.md B2–B6). One pass reads the cached objects, compares with MAAS, acts, and
 * writes only what changed. This file is the state machine: it reads the MAAS machine's
 * state and calls the steps (maasmachine_steps.h) that act on it; the pass's shared state
 * is in maasmachine_context.h.
 */
#include "maasmachine.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "fleet_snapshot.h"
#include "legacy.h"
#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_reuse.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

#define LOGGER             MAASMACHINE_LOGGER
/* Status of a pass that requeues within this many milliseconds is written by the next. */
#define STATUS_DEBOUNCE_MS 1000

static void status_from_node(struct maasmachine_ctx *c)
{
        struct maas_machine_status *st = &c->mm.status;
        const struct maas_node *n = &c->node;

        st->present = true;
        free(st->machine_state);
        st->machine_state = xstrdup(n->status_name ? n->status_name : "");
        free(st->hostname);
        st->hostname = n->hostname ? xstrdup(n->hostname) : NULL;
        st->machine_powered = n->power_state && strcmp(n->power_state, "on") == 0;
        st->has_machine_powered = true;
        free(st->failure_domain); /* the zone the machine landed in */
        st->failure_domain = n->zone && *n->zone ? xstrdup(n->zone) : NULL;
}

/* As the reference writes them (upstream-capmaas.md §1.3): the MAAS FQDN as ExternalDNS and
 * InternalDNS, then each MAAS IP as ExternalIP and InternalIP. */
static void addresses_from_node(struct maasmachine_ctx *c)
{
        struct schema_addresses *a = &c->mm.status.addresses;
        const struct maas_node *n = &c->node;
        bool fqdn = n->fqdn && *n->fqdn;
        size_t k = 0, want = (fqdn ? 2 : 0) + 2 * n->ip_addresses.n;

        for (size_t i = 0; i < a->n; i++) {
                free(a->items[i].type);
                free(a->items[i].address);
        }
        free(a->items);
        a->items = want ? xcalloc(want, sizeof(*a->items)) : NULL;
        a->present = true;
        if (fqdn) {
                a->items[k++] = (struct schema_address){ xstrdup("ExternalDNS"), xstrdup(n->fqdn) };
                a->items[k++] = (struct schema_address){ xstrdup("InternalDNS"), xstrdup(n->fqdn) };
        }
        for (size_t i = 0; i < n->ip_addresses.n; i++) {
                a->items[k++] = (struct schema_address){ xstrdup("ExternalIP"),
                                                         xstrdup(n->ip_addresses.v[i]) };
                a->items[k++] = (struct schema_address){ xstrdup("InternalIP"),
                                                         xstrdup(n->ip_addresses.v[i]) };
        }
        a->n = k;
}

static void set_ready(struct maasmachine_ctx *c, bool ready)
{
        c->mm.status.present = true;
        c->mm.status.ready = ready;
        c->mm.status.has_ready = true;
        if (ready) {
                c->mm.status.provisioned = true;
                c->mm.status.has_provisioned = true;
        }
}

static int dns_attachment(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        const struct schema_condition *k =
                schema_conditions_find(&c->mm.status.conditions, SCHEMA_COND_DNS_ATTACHED);
        bool registered = false;
        int err;

        if (k && strcmp(k->status, SCHEMA_CONDITION_TRUE) == 0 && c->mm.status.ready)
                return 0; /* attached and steady: no MAAS read per interval */
        if (!maasmachine_dns_expected(c))
                return 0; /* a VIP or External endpoint: no record to be in */
        err = maasmachine_dns_registered(c, &registered);
        if (err)
                return err;
        c->mm.status.dns_attached = registered;
        c->mm.status.has_dns_attached = true;
        if (registered) {
                reconciler_cond(&c->conds, SCHEMA_COND_DNS_ATTACHED, SCHEMA_CONDITION_TRUE,
                                SCHEMA_REASON_DNS_ATTACHED, NULL);
                return 0;
        }
        reconciler_cond(&c->conds, SCHEMA_COND_DNS_ATTACHED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_DNS_ATTACH_PENDING, "waiting for the API endpoint record");
        maasmachine_requeue(res, 5000);
        return 0;
}

static int state_deployed(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        int err;

        addresses_from_node(c);
        maasmachine_static_ip_status(c);
        if (!c->mm.status.machine_powered)
                return maasmachine_power(c, res);
        if (!c->mm.status.ready) {
                reconciler_observe_phase(c->p, "deploying",
                                         schema_strmap_get(&c->mm.meta.annotations,
                                                           RECONCILER_ANNOTATION_DEPLOY_STARTED),
                                         c->now);
                reconciler_observe_phase(c->p, "provisioning", c->mm.meta.creation_timestamp,
                                         c->now);
        }
        set_ready(c, true);
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_TRUE,
                        SCHEMA_REASON_MACHINE_DEPLOYED, NULL);
        maasmachine_reuse_deployed(c); /* a kept host in use again: its reuse tag goes */
        /* next just after the fleet list falls due: drift is seen within an interval */
        maasmachine_requeue(res, fleet_snapshot_next_ms(c->w));
        if (c->control_plane) {
                err = dns_attachment(c, res);
                if (err)
                        return err;
        }
        return maasmachine_node_provider_id(c, res);
}

/* A deploy just sent is looked at again in a second (its status written by that pass);
 * after that a Deploying machine's pass comes just after the in-flight list falls due
 * (fleet_snapshot.h: every 2 s while a deploy is young, up to 5 s), and reads that list. */
#define DEPLOY_FIRST_LOOK_MS 1000u

static int state_deploying(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        const char *started =
                schema_strmap_get(&c->mm.meta.annotations, RECONCILER_ANNOTATION_DEPLOY_STARTED);
        int64_t t0 = started ? strtoll(started, NULL, 10) : 0;
        uint64_t limit_s = c->p->settings.deploy_timeout_ms / 1000;

        if (maasmachine_provisioned(c)) /* redeployed behind our back */
                return maasmachine_host_lost(c, res);
        maasmachine_static_ip_status(c);
        set_ready(c, false);
        if (t0 > 0 && c->now - t0 > (int64_t)limit_s)
                return maasmachine_replace(c, RECONCILER_DEPLOY_TIMEOUT, res);
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_MACHINE_DEPLOYING, "MAAS machine %s is deploying",
                        c->node.system_id);
        maasmachine_requeue(res, fleet_snapshot_inflight_next_ms(c->w));
        return 0;
}

/* The machine left our hands (released, recommissioned, Broken, held by another owner). A
 * provisioned MaasMachine reports it as terminal for Cluster API to replace (its providerID
 * may be in the Machine and on a Node); before that, another host is allocated under it. */
static int state_lost(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        if (maasmachine_provisioned(c))
                return maasmachine_host_lost(c, res);
        reconciler_event(c->p, c->cur, "Warning", "MachineUnexpectedTermination",
                         "MAAS machine %s is %s and no longer deployed for this MaasMachine; "
                         "allocating another",
                         c->node.system_id, c->node.status_name);
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_MACHINE_TERMINATED, "MAAS machine %s is %s",
                        c->node.system_id, c->node.status_name);
        set_ready(c, false);
        maasmachine_set_ids(c, NULL, NULL);
        maasmachine_requeue(res, 1000);
        return 0;
}

static int state_undefined(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        reconciler_event(c->p, c->cur, "Warning", "MachineUnhandledState",
                         "MAAS machine %s is in state %s", c->node.system_id, c->node.status_name);
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_UNKNOWN,
                        SCHEMA_REASON_MACHINE_STATE_UNDEFINED, "MAAS machine %s is in state %s",
                        c->node.system_id, c->node.status_name);
        set_ready(c, false);
        maasmachine_requeue(res, 60000);
        return 0;
}

static int state_allocated(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        bool go = true;
        int err;

        if (maasmachine_provisioned(c)) /* never deployed again under a consumed providerID */
                return maasmachine_host_lost(c, res);
        err = maasmachine_network_apply(c, res, &go);
        if (err || !go) /* refused (released, backing off) or an earlier host still releasing */
                return err;
        err = maasmachine_deploy(c);
        if (err)
                return err;
        status_from_node(c);
        err = state_deploying(c, res);
        maasmachine_requeue(res, DEPLOY_FIRST_LOOK_MS);
        return err;
}

static int state_failed(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        if (maasmachine_provisioned(c))
                return maasmachine_host_lost(c, res);
        return maasmachine_replace(c, RECONCILER_DEPLOY_FAILED, res);
}

struct state_row {
        const char *name;
        int (*fn)(struct maasmachine_ctx *c, struct reconcile_result *res);
};

static const struct state_row state_table[] = {
        { "Deployed", state_deployed },   { "Deploying", state_deploying },
        { "Allocated", state_allocated }, { "Failed deployment", state_failed },
        { "Ready", state_lost },          { "New", state_lost },
        { "Releasing", state_lost },      { "Disk erasing", state_lost },
        { "Commissioning", state_lost },  { "Testing", state_lost },
        { "Broken", state_lost },
};

static int drive(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        const char *st = c->node.status_name ? c->node.status_name : "";

        status_from_node(c);
        for (size_t i = 0; i < sizeof(state_table) / sizeof(state_table[0]); i++)
                if (strcmp(state_table[i].name, st) == 0)
                        return state_table[i].fn(c, res);
        return state_undefined(c, res);
}

static bool names_machine(const struct maasmachine_ctx *c)
{
        return (c->mm.spec.system_id && *c->mm.spec.system_id) ||
               (c->mm.spec.provider_id && *c->mm.spec.provider_id);
}

/* The machine the MaasMachine named: drive it only while it is still held for us. */
static int drive_held(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        bool owned = false;
        int err = maasmachine_owned(c, &owned);

        if (err)
                return err;
        if (owned)
                return drive(c, res);
        status_from_node(c);
        return state_lost(c, res);
}

static int normal_prereqs(struct maasmachine_ctx *c, bool *ret_go)
{
        const cJSON *cluster = kube_object_json(c->cluster);

        *ret_go = false;
        if (!capi_cluster_infra_provisioned(&c->p->capi, cluster)) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_WAITING_FOR_CLUSTER_INFRA,
                                "waiting for the cluster infrastructure to be provisioned");
                return 0;
        }
        if (!capi_machine_data_secret(kube_object_json(c->machine))) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_WAITING_FOR_BOOTSTRAP_DATA,
                                "waiting for the bootstrap data secret");
                return 0;
        }
        *ret_go = true;
        return 0;
}

static int reconcile_normal(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        bool go = false, got = false, named;
        int err;

        if (!schema_meta_has_finalizer(&c->mm.meta, SCHEMA_FINALIZER_MACHINE)) {
                schema_strv_add(&c->mm.meta.finalizers, SCHEMA_FINALIZER_MACHINE);
                err = maasmachine_flush(c, true);
                if (err)
                        return err;
        }
        err = normal_prereqs(c, &go);
        if (err || !go)
                return err;
        if (maasmachine_terminal(c))
                return 0; /* reported lost: Cluster API replaces the Machine */
        named = names_machine(c);
        if (c->mm.spec.addresses_from_pools.n > 0 && !maasmachine_provisioned(c)) {
                /* before allocation: a missing pool shows at once, and nothing is taken
                 * from MAAS until the address is known (read now when none is allocated) */
                err = maasmachine_ipam_claim(c, !named, res, &go);
                if (err || !go)
                        return err;
        }
        err = maasmachine_find_node(c);
        if (err) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_UNKNOWN,
                                SCHEMA_REASON_MACHINE_NOT_FOUND, "cannot read the MAAS machine: %s",
                                cm_strerror(err));
                return err;
        }
        if (c->list_later) { /* nothing read: the next in-flight list answers */
                maasmachine_requeue(res, fleet_snapshot_inflight_next_ms(c->w));
                return 0;
        }
        if (c->unplaced_later) { /* the next unplaced list says whether one is stamped */
                maasmachine_requeue(res, fleet_snapshot_unplaced_next_ms(c->w));
                return 0;
        }
        if (!c->have_node && names_machine(c)) /* gone after provisioning (find_node) */
                return maasmachine_host_lost(c, res);
        if (c->have_node && named)
                return drive_held(c, res);
        if (!c->have_node) {
                if (maasmachine_static_ip_backoff(c, res) || maasmachine_deploy_backoff(c, res))
                        return 0; /* a refused static address or deploy: not before its backoff */
                err = maasmachine_is_vm(c) ? maasmachine_compose(c, res, &got)
                                           : maasmachine_allocate(c, res, &got);
                if (err || !got)
                        return err;
        }
        return drive(c, res);
}

/* The owner Machine and the Cluster (through the Machine's cluster-name label, else the
 * MaasMachine's own): either may be missing, a deleting MaasMachine's owner often is. */
static void lookup_owners(struct maasmachine_ctx *c)
{
        const cJSON *obj = kube_object_json(c->obj);

        c->machine = reconciler_owner(c->p, &c->mm.meta, "Machine");
        c->cluster = c->machine ? reconciler_cluster_of(c->p, c->ns, kube_object_json(c->machine))
                                : NULL;
        if (!c->cluster)
                c->cluster = reconciler_cluster_of(c->p, c->ns, obj);
        c->control_plane = capi_is_control_plane(obj) ||
                           (c->machine && capi_is_control_plane(kube_object_json(c->machine)));
}

/* The CAPI Cluster's name: the MaasMachine's cluster-name label (what the fleet index
 * reads), else the Cluster found through the Machine. Borrowed. */
static const char *cluster_name(const struct maasmachine_ctx *c)
{
        const char *l = json_find_str(kube_object_json(c->obj), "metadata", "labels",
                                      "cluster.x-k8s.io/cluster-name", NULL);

        return l ? l : c->cluster ? kube_object_name(c->cluster) : NULL;
}

static int pass(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        int err, ferr;

        lookup_owners(c);
        /* Pause first: a paused delete (clusterctl move pauses, then deletes) does nothing. */
        if (reconciler_pause_condition(&c->conds, c->cluster ? kube_object_json(c->cluster) : NULL,
                                       kube_object_json(c->obj)))
                return maasmachine_flush(c, false);
        /* The cluster's MAAS (spec.identityRef), for every step, deleting ones too: a
         * machine is only ever looked for and released in the MAAS that holds it. */
        if (!reconciler_maas_pick(c->w, c->ns, cluster_name(c), NULL, &c->conds,
                                  kube_object_json(c->obj), res))
                return maasmachine_flush(c, false);
        if (c->mm.meta.deletion_timestamp)
                return maasmachine_delete_pass(c, res);
        if (!c->machine) {
                log_debug(LOGGER, "waiting for the Machine owner reference", "object=%s/%s", c->ns,
                          c->name);
                return 0;
        }
        if (!c->cluster) {
                log_debug(LOGGER, "waiting for the Cluster", "object=%s/%s", c->ns, c->name);
                return 0;
        }
        err = reconcile_normal(c, res);
        /* A pass that comes back within a second (a deploy just started) leaves its status
         * to that next pass: status is rebuilt from MAAS every time, and a fast deploy then
         * costs one status write instead of two. */
        ferr = maasmachine_flush(c, c->list_later || c->unplaced_later ||
                                            (err == 0 && res->outcome == RECONCILE_REQUEUE_AFTER &&
                                             res->after_ms <= STATUS_DEBOUNCE_MS));
        return err ? err : ferr;
}

int maasmachine_reconcile(void *wctx,
                          const char *ns,
                          const char *name,
                          struct reconcile_result *res)
{
        struct reconciler_worker *w = wctx;
        struct maasmachine_ctx c = { .w = w, .p = w->p, .ns = ns, .name = name };
        cJSON *enc = NULL;
        int err;

        c.conds = (struct reconciler_conditions){ .list = &c.mm.status.conditions,
                                                  .status_present = &c.mm.status.present,
                                                  .generation = &c.mm.meta.generation,
                                                  .now = &c.now };

        maas_machine_init(&c.mm);
        c.now = (time_t)clock_wall_s(w->p->clock);
        c.obj = informer_get(w->p->maasmachines, ns, name);
        if (!c.obj)
                return 0;
        err = maas_machine_decode(kube_object_json(c.obj), &c.mm, NULL);
        if (err) {
                log_warn(LOGGER, "cannot decode the MaasMachine", "object=%s/%s", ns, name);
                err = 0;
                goto out;
        }
        c.cur = cJSON_Duplicate(kube_object_json(c.obj), true);
        err = maas_machine_encode(&c.mm, &enc);
        if (err == 0)
                err = legacy_migrate_status(w, &KUBE_RES_MAASMACHINES, &c.cur, enc);
        if (err == 0)
                err = pass(&c, res);
        if (err)
                log_info(LOGGER, "reconcile failed", "object=%s/%s error=%s", ns, name,
                         cm_strerror(err));
out:
        reconciler_worker_use_default(w);
        maasmachine_ctx_release(&c);
        return err;
}
