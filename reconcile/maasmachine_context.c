/*
 * maasmachine_context: the shared state of a MaasMachine pass and its helpers: conditions,
 * events, the ids and annotations on the object, the MAAS machine the pass holds, and the
 * write of what the pass changed (see maasmachine_context.h).
 */
#include "maasmachine_context.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "patch_helper.h"
#include "xalloc.h"

void maasmachine_set_annotation(struct maasmachine_ctx *c, const char *key, const char *value)
{
        if (value)
                schema_strmap_set(&c->mm.meta.annotations, key, value);
        else
                (void)schema_strmap_remove(&c->mm.meta.annotations, key);
}

void maasmachine_set_ids(struct maasmachine_ctx *c, const char *zone, const char *system_id)
{
        struct maas_machine_spec *s = &c->mm.spec;

        free(s->system_id);
        free(s->provider_id);
        s->system_id = system_id ? xstrdup(system_id) : NULL;
        s->provider_id = system_id ? schema_provider_id_format(zone ? zone : "", system_id) : NULL;
        /* the zone it landed in, as the reference writes it (CAPI v1beta1 copies it back) */
        if (system_id && zone && *zone &&
            (!s->failure_domain || strcmp(s->failure_domain, zone) != 0)) {
                free(s->failure_domain);
                s->failure_domain = xstrdup(zone);
        }
}

void maasmachine_take_node(struct maasmachine_ctx *c, struct maas_node *n)
{
        if (c->have_node)
                maas_node_release(&c->node);
        c->node = *n;
        *n = (struct maas_node){ 0 };
        c->have_node = true;
}

void maasmachine_drop_node(struct maasmachine_ctx *c)
{
        if (c->have_node)
                maas_node_release(&c->node);
        c->node = (struct maas_node){ 0 };
        c->have_node = false;
}

void maasmachine_set_claimed_ip(struct maasmachine_ctx *c, struct schema_static_ip *ip)
{
        struct schema_static_ip *old = c->claimed_ip;

        c->claimed_ip = ip;
        if (!old)
                return;
        free(old->ip);
        free(old->cidr);
        free(old->gateway);
        schema_strv_release(&old->nameservers);
        free(old->interface);
        free(old);
}

void maasmachine_requeue(struct reconcile_result *res, uint64_t ms)
{
        if (res->outcome != RECONCILE_REQUEUE_AFTER || res->after_ms > ms) {
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = ms;
        }
}

/* The Ready summary: MachineDeployed, plus DNSAttached for control planes, plus
 * IPAddressClaimed with addressesFromPools. */
static void ready_summary(struct maasmachine_ctx *c)
{
        const char *types[3];
        size_t n = 0;

        types[n++] = SCHEMA_COND_MACHINE_DEPLOYED;
        if (c->control_plane)
                types[n++] = SCHEMA_COND_DNS_ATTACHED;
        if (c->mm.spec.addresses_from_pools.n > 0)
                types[n++] = SCHEMA_COND_IPADDRESS_CLAIMED;
        reconciler_ready_summary(&c->conds, types, n);
}

/*
 * Writes what this pass changed. The diff is taken against the object as this pass read it
 * (plus what it already wrote), never against the server's latest copy: a merge patch then
 * carries only our changes, and whatever another client (capi-sim, CAPI, a user) changed
 * meanwhile is left as they wrote it.
 */
int maasmachine_flush(struct maasmachine_ctx *c, bool metadata_only)
{
        cJSON *after = NULL;
        unsigned writes = 0;
        int err;

        if (!metadata_only && c->mm.status.present)
                ready_summary(c);
        err = maas_machine_encode(&c->mm, &after);
        if (err)
                return err;
        err = reconciler_write(c->w, &KUBE_RES_MAASMACHINES, &c->cur, after, metadata_only,
                               &writes);
        c->writes += writes;
        return err;
}

void maasmachine_ctx_release(struct maasmachine_ctx *c)
{
        kube_object_unref(c->obj);
        kube_object_unref(c->machine);
        kube_object_unref(c->cluster);
        maas_machine_release(&c->mm);
        maasmachine_set_claimed_ip(c, NULL);
        if (c->have_node)
                maas_node_release(&c->node);
        cJSON_Delete(c->cur);
}
