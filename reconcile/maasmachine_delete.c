/*
 * maasmachine_delete: a deleting MaasMachine. Wait until a control plane's IP has left the API
 * endpoint record, release the machine (erase per --release-erase), record it, delete its
 * IPAddressClaim (maasmachine_ipam.c: only now, after the release) and remove the
 * finalizer. With clusterctl's delete-for-move annotation nothing is released: the
 * object is being moved to another management cluster that will own the machine. The
 * reference provider's maas.lxd.io/host-evacuation finalizer goes with ours. A paused
 * Cluster or MaasMachine never gets here (maasmachine.c checks pause first).
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fleet_snapshot.h"
#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_reuse.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

#define LOGGER      MAASMACHINE_LOGGER
#define OR_EMPTY(s) ((s) ? (s) : "")

static bool releasable(const char *status)
{
        static const char *const gone[] = { "Ready", "Releasing", "Disk erasing", "New" };

        for (size_t i = 0; status && i < sizeof(gone) / sizeof(gone[0]); i++)
                if (strcmp(gone[i], status) == 0)
                        return false;
        return true;
}

static int finish(struct maasmachine_ctx *c)
{
        struct provider *p = c->p;

        (void)schema_strv_remove(&c->mm.meta.finalizers, SCHEMA_FINALIZER_MACHINE);
        /* The reference v0.8's LXD-host finalizer: its host-maintenance controller, which
         * alone removes it, does not run after an upgrade (upstream-capmaas.md 3.7). */
        (void)schema_strv_remove(&c->mm.meta.finalizers, SCHEMA_FINALIZER_HOST_EVACUATION);
        reconciler_observe_phase(p, "deleting", c->mm.meta.deletion_timestamp, c->now);
        pthread_mutex_lock(&p->lock);
        if (c->have_node) {
                reconciler_table_del(&p->power_off_reads, c->node.system_id);
                reconciler_table_del(&p->node_done, c->node.system_id);
        }
        if (c->mm.meta.uid) { /* gone with the object: its UID is never allocated for again */
                reconciler_table_del(&p->allocate_tried, c->mm.meta.uid);
                reconciler_table_del(&p->unplaced_none, c->mm.meta.uid);
                reconciler_table_del(&p->static_ip_retry, c->mm.meta.uid);
                reconciler_table_del(&p->deploy_retry, c->mm.meta.uid);
        }
        pthread_mutex_unlock(&p->lock);
        return maasmachine_flush(c, true);
}

static int wait_dns_detach(struct maasmachine_ctx *c, struct reconcile_result *res, bool *ret_wait)
{
        bool registered = false;
        int err;

        *ret_wait = false;
        if (!c->control_plane || !c->have_node || c->node.ip_addresses.n == 0)
                return 0;
        if (!c->cluster) /* the pass looked it up */
                return 0;
        err = maasmachine_dns_registered(c, &registered);
        if (err || !registered)
                return err;
        reconciler_cond(&c->conds, SCHEMA_COND_DNS_ATTACHED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_DNS_DETACH_PENDING,
                        "waiting for the API endpoint record to drop %s",
                        c->node.ip_addresses.v[0]);
        c->mm.status.dns_attached = true;
        c->mm.status.has_dns_attached = true;
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = 2000;
        *ret_wait = true;
        return maasmachine_flush(c, false);
}

/* A machine found by the MaasMachine's ids is released only while it is still held for it
 * (the stamp decides); one adopted by the agent_name stamp is ours by definition. */
static int held(struct maasmachine_ctx *c, bool *ret)
{
        const char *sid = c->mm.spec.system_id;

        *ret = true;
        if (!sid || strcmp(sid, c->node.system_id) != 0)
                return 0;
        return maasmachine_owned(c, ret);
}

/* How long a release this process sent is remembered for the deleting MaasMachine's later
 * passes. */
#define RELEASED_KEEP_S 600

static char *released_key(const struct maasmachine_ctx *c, const char *sid)
{
        return xasprintf("%s/%s", c->mm.meta.uid ? c->mm.meta.uid : "", sid);
}

/* This process released sid for this MaasMachine (its UID) in the last RELEASED_KEEP_S: a
 * later pass (the cache not yet showing the finalizer gone, or the finalizer write failed)
 * needs neither a GET nor another release. */
static bool released_here(struct maasmachine_ctx *c, const char *sid)
{
        struct provider *p = c->p;
        char *key = released_key(c, sid);
        struct reconciler_entry *e;
        bool yes;

        pthread_mutex_lock(&p->lock);
        e = reconciler_table_get(&p->released, key);
        yes = e && c->now - e->a < RELEASED_KEEP_S;
        pthread_mutex_unlock(&p->lock);
        free(key);
        return yes;
}

static void note_released(struct maasmachine_ctx *c, const char *sid)
{
        struct provider *p = c->p;
        char *key = released_key(c, sid);

        pthread_mutex_lock(&p->lock);
        for (size_t i = p->released.n; i-- > 0;) /* forget what is older than the window */
                if (c->now - p->released.items[i].a >= RELEASED_KEEP_S)
                        reconciler_table_del(&p->released, p->released.items[i].key);
        reconciler_table_put(&p->released, key)->a = c->now;
        pthread_mutex_unlock(&p->lock);
        free(key);
}

/* A static address linked on a machine comes off before the finalizer goes (MAAS keeps a
 * STATIC link across release): a deployed machine is released first and undone once Ready. */
static int undo_static_ip(struct maasmachine_ctx *c, struct reconcile_result *res, bool *ret_wait)
{
        bool done = true, release = false;
        char *sid;
        int err;

        *ret_wait = false;
        err = maasmachine_network_undo(c, &done, &release);
        if (err || done)
                return err;
        /* "<system_id> <ip> <cidr> <interface>" (maasmachine_network.c) */
        sid = xstrdup(OR_EMPTY(
                schema_strmap_get(&c->mm.meta.annotations, RECONCILER_ANNOTATION_STATIC_IP_HOST)));
        sid[strcspn(sid, " ")] = '\0';
        if (release) {
                err = maasmachine_release(c, sid);
                if (err)
                        goto out;
                note_released(c, sid);
                reconciler_event(c->p, c->cur, "Normal", "SuccessfulRelease",
                                 "Released instance \"%s\"", sid);
        }
        reconciler_cond(&c->conds, SCHEMA_COND_STATIC_IP_APPLIED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_STATIC_IP_PENDING,
                        "unlinking the static address once MAAS machine %s is released", sid);
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = 2000;
        *ret_wait = true;
        err = maasmachine_flush(c, false);
out:
        free(sid);
        return err;
}

/* Status, the IPAddressClaim, then the finalizer: once it is gone the object may vanish at
 * once. The claim goes only now that MAAS no longer holds the machine (released, or never
 * ours), so its address returns to the pool only when MAAS has let it go. */
static int deleted(struct maasmachine_ctx *c)
{
        int err;

        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_DELETED, NULL);
        err = maasmachine_flush(c, false);
        if (err == 0)
                err = maasmachine_ipam_release(c);
        if (err)
                return err;
        return finish(c);
}

int maasmachine_delete_pass(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        const char *sid;
        bool wait = false, owned = true, had = c->mm.spec.system_id || c->mm.spec.provider_id;
        int err;

        if (!schema_meta_has_finalizer(&c->mm.meta, SCHEMA_FINALIZER_MACHINE))
                return 0;
        if (schema_strmap_get(&c->mm.meta.annotations, RECONCILER_ANNOTATION_DELETE_FOR_MOVE)) {
                log_info(LOGGER, "delete for move: keeping the MAAS machine", "object=%s/%s", c->ns,
                         c->name);
                return finish(c);
        }
        if (c->mm.spec.system_id && released_here(c, c->mm.spec.system_id) &&
            !schema_strmap_get(&c->mm.meta.annotations, RECONCILER_ANNOTATION_STATIC_IP_HOST))
                return deleted(c);
        err = maasmachine_find_node(c);
        if (err)
                return err;
        if (c->list_later) { /* the next deleting list, within a second, answers */
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = fleet_snapshot_deleting_next_ms(c->w);
                return 0;
        }
        err = wait_dns_detach(c, res, &wait);
        if (err || wait)
                return err;
        err = undo_static_ip(c, res, &wait);
        if (err || wait)
                return err;
        sid = c->have_node ? c->node.system_id : NULL;
        err = sid ? held(c, &owned) : 0;
        if (err)
                return err;
        if (maasmachine_is_vm(c) && (!sid || maasmachine_node_is_vm(&c->node))) {
                err = maasmachine_vm_delete(c, sid && owned);
                if (err)
                        return err;
        } else if (sid && !owned) {
                log_info(LOGGER,
                         "the MAAS machine is no longer held for this MaasMachine: left alone",
                         "object=%s/%s system_id=%s owner=%s", c->ns, c->name, sid,
                         c->node.owner ? c->node.owner : "");
        } else if (sid && releasable(c->node.status_name)) {
                err = maasmachine_reuse_keep(c, sid); /* nodeReuse: tag it for its owner */
                if (err)
                        return err;
                err = maasmachine_release(c, sid);
                if (err)
                        return err;
                note_released(c, sid);
                reconciler_event(c->p, c->cur, "Normal", "SuccessfulRelease",
                                 "Released instance \"%s\"", sid);
        } else if (!sid && had) {
                reconciler_event(c->p, c->cur, "Warning", "NoMachineFound",
                                 "Unable to find matching MaaS machine");
        }
        return deleted(c);
}
