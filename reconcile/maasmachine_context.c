/*
 * maasmachine_context: the shared state of a MaasMachine pass and its helpers: conditions,
 * events, the ids and annotations on the object, the MAAS machine the pass holds, and the
 * write of what the pass changed (see maasmachine_context.h).
 */
#include "maasmachine_context.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
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

/* --- backoff ---------------------------------------------------------------------------- */

#define BACKOFF_BASE_S 10
#define BACKOFF_MAX_S  300

/* The backoff in the annotation, or the one this process last wrote when that is later. */
static void backoff_state(const struct maasmachine_ctx *c,
                          const struct maasmachine_backoff *b,
                          unsigned *ret_failures,
                          int64_t *ret_at)
{
        const char *v = schema_strmap_get(&c->mm.meta.annotations, b->annotation);
        const struct reconciler_entry *e;
        unsigned failures = 0;
        long long at = 0;

        if (!v || sscanf(v, "%u %lld", &failures, &at) != 2) {
                failures = 0;
                at = 0;
        }
        pthread_mutex_lock(&c->p->lock);
        e = c->mm.meta.uid ? reconciler_table_get(b->mem, c->mm.meta.uid) : NULL;
        if (e && e->b > at) {
                failures = (unsigned)e->a;
                at = e->b;
        }
        pthread_mutex_unlock(&c->p->lock);
        *ret_failures = failures;
        *ret_at = at;
}

/* Remembers the backoff written (at 0: cleared). */
static void backoff_remember(struct maasmachine_ctx *c,
                             const struct maasmachine_backoff *b,
                             unsigned failures,
                             int64_t at)
{
        struct reconciler_entry *e;

        if (!c->mm.meta.uid)
                return;
        pthread_mutex_lock(&c->p->lock);
        if (at) {
                e = reconciler_table_put(b->mem, c->mm.meta.uid);
                e->a = failures;
                e->b = at;
        } else {
                reconciler_table_del(b->mem, c->mm.meta.uid);
        }
        pthread_mutex_unlock(&c->p->lock);
}

bool maasmachine_backoff_wait(struct maasmachine_ctx *c,
                              const struct maasmachine_backoff *b,
                              struct reconcile_result *res)
{
        unsigned failures;
        int64_t at;

        backoff_state(c, b, &failures, &at);
        if (at <= (int64_t)c->now)
                return false;
        maasmachine_requeue(res, (uint64_t)(at - (int64_t)c->now) * 1000u);
        return true;
}

unsigned maasmachine_backoff_fail(struct maasmachine_ctx *c, const struct maasmachine_backoff *b)
{
        unsigned failures, delay = b->base_s ? b->base_s : BACKOFF_BASE_S;
        int64_t at;
        char v[48];

        backoff_state(c, b, &failures, &at);
        failures++;
        for (unsigned i = 1; i < failures && delay < BACKOFF_MAX_S; i++)
                delay *= 2;
        if (delay > BACKOFF_MAX_S)
                delay = BACKOFF_MAX_S;
        (void)snprintf(v, sizeof(v), "%u %lld", failures, (long long)c->now + delay);
        maasmachine_set_annotation(c, b->annotation, v);
        backoff_remember(c, b, failures, (int64_t)c->now + delay);
        return delay;
}

void maasmachine_backoff_clear(struct maasmachine_ctx *c, const struct maasmachine_backoff *b)
{
        maasmachine_set_annotation(c, b->annotation, NULL);
        backoff_remember(c, b, 0, 0);
}
