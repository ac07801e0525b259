/*
 * maasremediation: the MaasRemediation state machine (see maasremediation.h and
 * docs/remediation.md). Level-triggered: each pass reads the phase, retryCount and
 * lastRemediated it wrote and takes the next step; the status is written after every
 * step that changed it.
 */
#include "maasremediation.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "metrics.h"
#include "parse.h"
#include "rfc3339.h"
#include "xalloc.h"

#define LOGGER        "maasremediation"
#define POLL_MS       2000  /* the Node's Ready is read this often while Waiting */
#define PAUSE_POLL_MS 10000 /* a paused Cluster is looked at again this often */
#define RETRY_MS      5000  /* a power cycle MAAS did not confirm is retried after */
#define STALE_MS      200   /* a cache behind our own write is looked at again after */

static bool phase_is(const struct remediation_ctx *c, const char *phase)
{
        return c->r.status.phase && strcmp(c->r.status.phase, phase) == 0;
}

static bool in_progress(const struct remediation_ctx *c)
{
        return !c->r.status.phase || !*c->r.status.phase ||
               phase_is(c, SCHEMA_REMEDIATION_RUNNING) || phase_is(c, SCHEMA_REMEDIATION_WAITING);
}

static void set_phase(struct remediation_ctx *c, const char *phase)
{
        free(c->r.status.phase);
        c->r.status.phase = xstrdup(phase);
        c->r.status.present = true;
}

static void count_result(struct remediation_ctx *c, const char *result)
{
        if (c->p->remediations)
                metric_counter_inc(metric_series(c->p->remediations, result));
}

/* capmaas_remediations_in_progress: the remediations whose last pass left them Running or
 * Waiting (gone ones are dropped). */
static void track(struct provider *p, const char *ns, const char *name, bool active)
{
        char *key = xasprintf("%s/%s", ns, name);

        pthread_mutex_lock(&p->lock);
        if (active)
                (void)reconciler_table_put(&p->remediating, key);
        else
                reconciler_table_del(&p->remediating, key);
        if (p->remediations_in_progress)
                metric_gauge_set(p->remediations_in_progress, (double)p->remediating.n);
        pthread_mutex_unlock(&p->lock);
        free(key);
}

/* p->remediation_cycles: the retryCount this remediation's last power cycle wrote and
 * whether its outcome was written, so a pass that reads a cache not yet holding those writes
 * neither power cycles nor ends (and counts) it again. */
static void cycles_remember(struct remediation_ctx *c, bool ended)
{
        struct reconciler_entry *e;

        pthread_mutex_lock(&c->p->lock);
        e = reconciler_table_put(&c->p->remediation_cycles, c->r.meta.uid ? c->r.meta.uid : "");
        e->a = c->r.status.retry_count;
        e->b = ended;
        pthread_mutex_unlock(&c->p->lock);
}

static void cycles_forget(struct remediation_ctx *c)
{
        pthread_mutex_lock(&c->p->lock);
        reconciler_table_del(&c->p->remediation_cycles, c->r.meta.uid ? c->r.meta.uid : "");
        pthread_mutex_unlock(&c->p->lock);
}

/* True when the cached object is behind what this controller last wrote. */
static bool cache_behind(struct remediation_ctx *c)
{
        const struct reconciler_entry *e;
        bool behind;

        pthread_mutex_lock(&c->p->lock);
        e = reconciler_table_get(&c->p->remediation_cycles, c->r.meta.uid ? c->r.meta.uid : "");
        behind = e && (c->r.status.retry_count < e->a || (e->b && in_progress(c)));
        pthread_mutex_unlock(&c->p->lock);
        return behind;
}

static int flush(struct remediation_ctx *c)
{
        cJSON *after = NULL;
        int err = maas_remediation_encode(&c->r, &after);

        if (err)
                return err;
        return reconciler_write(c->w, &KUBE_RES_MAASREMEDIATIONS, &c->cur, after, false, NULL);
}

/* RemediationAllowed False with reason; the event (and, for a refusal that ends the
 * remediation, the refused count) only when the reason is new: a pass that finds the same
 * refusal again stays quiet. */
static void disallow(struct remediation_ctx *c, const char *reason, const char *msg, bool ends)
{
        const struct schema_condition *old =
                schema_conditions_find(&c->r.status.conditions, REMEDIATION_COND_ALLOWED);

        if (old && old->reason && strcmp(old->reason, reason) == 0 && old->status &&
            strcmp(old->status, SCHEMA_CONDITION_FALSE) == 0)
                return;
        reconciler_cond(&c->conds, REMEDIATION_COND_ALLOWED, SCHEMA_CONDITION_FALSE, reason, "%s",
                        msg);
        reconciler_event(c->p, c->cur, "Warning", reason, "%s; no power call", msg);
        if (ends)
                count_result(c, "refused");
        log_info(LOGGER, "remediation refused", "object=%s/%s reason=%s", c->ns, c->name, reason);
}

/* A refusal for good: Failed, nothing is powered. */
static int refuse(struct remediation_ctx *c, const char *reason, const char *fmt, ...)
        PRINTF_LIKE(3, 4);

static int refuse(struct remediation_ctx *c, const char *reason, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        disallow(c, reason, msg, true);
        set_phase(c, SCHEMA_REMEDIATION_FAILED);
        cycles_remember(c, true);
        return flush(c);
}

static const char *node_name(const struct remediation_ctx *c)
{
        const char *n = c->machine ? capi_machine_node_name(kube_object_json(c->machine)) : NULL;

        return n ? n : "(no nodeRef)";
}

static int succeed(struct remediation_ctx *c)
{
        set_phase(c, SCHEMA_REMEDIATION_SUCCEEDED);
        reconciler_cond(&c->conds, REMEDIATION_COND_NODE_READY, SCHEMA_CONDITION_TRUE, "NodeReady",
                        "Node %s is Ready after %lld power cycle%s", node_name(c),
                        (long long)c->r.status.retry_count,
                        c->r.status.retry_count == 1 ? "" : "s");
        reconciler_event(c->p, c->cur, "Normal", "RemediationSucceeded",
                         "Node %s is Ready again after %lld power cycle%s", node_name(c),
                         (long long)c->r.status.retry_count,
                         c->r.status.retry_count == 1 ? "" : "s");
        count_result(c, "succeeded");
        cycles_remember(c, true);
        return flush(c);
}

/* retryLimit power cycles did not bring the Node back: the Machine goes back to Cluster
 * API, whose owner controller replaces it. */
static int exhaust(struct remediation_ctx *c)
{
        char msg[512];
        int err;

        (void)snprintf(msg, sizeof(msg),
                       "MaasRemediation %s: %lld power cycle%s did not bring Node %s back; "
                       "the Machine is handed back for replacement",
                       c->name, (long long)c->r.status.retry_count,
                       c->r.status.retry_count == 1 ? "" : "s", node_name(c));
        err = remediation_hand_back(c, msg);
        if (err)
                return err;
        set_phase(c, SCHEMA_REMEDIATION_DELETING);
        reconciler_cond(&c->conds, REMEDIATION_COND_NODE_READY, SCHEMA_CONDITION_FALSE,
                        "RetryLimitReached", "%s", msg);
        reconciler_event(c->p, c->cur, "Warning", "RemediationFailed", "%s", msg);
        count_result(c, "failed");
        cycles_remember(c, true);
        return flush(c);
}

static int cycle(struct remediation_ctx *c, struct reconcile_result *res)
{
        char ts[RFC3339_LEN];
        char *type = NULL;
        bool ok = false;
        int err;

        if (c->r.status.retry_count >= c->retry_limit)
                return exhaust(c);
        err = remediation_power_type_ok(c, &ok, &type);
        if (err == 0 && !ok)
                err = refuse(c, "PowerTypeNotCyclable",
                             "MAAS cannot power cycle machine %s (power type \"%s\")", c->system_id,
                             type);
        free(type);
        if (err || !ok)
                return err;
        reconciler_cond(&c->conds, REMEDIATION_COND_ALLOWED, SCHEMA_CONDITION_TRUE, "Allowed",
                        NULL);
        set_phase(c, SCHEMA_REMEDIATION_RUNNING);
        err = remediation_power_cycle(c);
        if (err == CM_ETIMEDOUT) {
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, RETRY_MS };
                return flush(c);
        }
        if (err) {
                reconciler_cond(&c->conds, REMEDIATION_COND_POWER_CYCLED, SCHEMA_CONDITION_FALSE,
                                "PowerCycleFailed", "MAAS: %s", maas_strerror(err));
                (void)!flush(c);
                return err; /* the controller's backoff */
        }
        c->r.status.retry_count++;
        c->r.status.has_retry_count = true;
        rfc3339_format(c->now, ts);
        free(c->r.status.last_remediated);
        c->r.status.last_remediated = xstrdup(ts);
        if (c->p->remediation_power_cycles)
                metric_counter_inc(c->p->remediation_power_cycles);
        cycles_remember(c, false);
        set_phase(c, SCHEMA_REMEDIATION_WAITING);
        reconciler_cond(&c->conds, REMEDIATION_COND_POWER_CYCLED, SCHEMA_CONDITION_TRUE,
                        "PowerCycled", "power cycle %lld of %lld at %s",
                        (long long)c->r.status.retry_count, (long long)c->retry_limit, ts);
        reconciler_cond(&c->conds, REMEDIATION_COND_NODE_READY, SCHEMA_CONDITION_FALSE,
                        "WaitingForNode", "waiting up to %llu s for Node %s to be Ready",
                        (unsigned long long)(c->timeout_ms / 1000), node_name(c));
        *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, POLL_MS };
        return flush(c);
}

static int waiting(struct remediation_ctx *c, struct reconcile_result *res)
{
        int64_t since = reconciler_parse_time(c->r.status.last_remediated);
        uint64_t waited_ms;
        bool ready = false;
        int err;

        if (since < 0)
                since = 0;
        err = remediation_node_ready(c, since, &ready);
        if (err) {
                log_info(LOGGER, "cannot read the Node", "object=%s/%s error=%s", c->ns, c->name,
                         cm_strerror(err));
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, POLL_MS };
                return 0;
        }
        if (ready)
                return succeed(c);
        waited_ms = c->now > since ? (uint64_t)(c->now - since) * 1000 : 0;
        if (waited_ms < c->timeout_ms) {
                uint64_t left = c->timeout_ms - waited_ms;

                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER,
                                                  left < POLL_MS ? left : POLL_MS };
                return 0;
        }
        if (c->r.status.retry_count < c->retry_limit)
                reconciler_event(c->p, c->cur, "Warning", "NodeNotReady",
                                 "Node %s is not Ready %llu s after power cycle %lld; power "
                                 "cycling again",
                                 node_name(c), (unsigned long long)(c->timeout_ms / 1000),
                                 (long long)c->r.status.retry_count);
        return cycle(c, res);
}

/* Being deleted (the MachineHealthCheck found the Machine healthy, or the Machine went): a
 * remediation still Waiting whose Node is Ready now succeeded; then the finalizer goes. */
static int finish(struct remediation_ctx *c)
{
        bool ready = false;
        int err = 0;

        if (phase_is(c, SCHEMA_REMEDIATION_WAITING) && !cache_behind(c) &&
            remediation_node_ready(c, 0, &ready) == 0 && ready)
                err = succeed(c);
        if (err == 0 && schema_strv_remove(&c->r.meta.finalizers, SCHEMA_FINALIZER_REMEDIATION))
                err = flush(c);
        if (err == 0)
                cycles_forget(c);
        return err;
}

static bool deleting(const struct kube_object *o)
{
        return json_find(kube_object_json(o), "metadata", "deletionTimestamp", NULL) != NULL;
}

static int pass(struct remediation_ctx *c, struct reconcile_result *res)
{
        const char *cause;
        int err;

        if (c->r.meta.deletion_timestamp)
                return finish(c);
        if (cache_behind(c)) {
                /* the cache has not caught up with our last power cycle's write yet */
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, STALE_MS };
                return 0;
        }
        if (!schema_meta_has_finalizer(&c->r.meta, SCHEMA_FINALIZER_REMEDIATION)) {
                schema_strv_add(&c->r.meta.finalizers, SCHEMA_FINALIZER_REMEDIATION);
                err = flush(c);
                if (err)
                        return err;
        }
        if (phase_is(c, SCHEMA_REMEDIATION_DELETING) && c->machine && !deleting(c->machine))
                return remediation_hand_back(c, "handed back for replacement");
        if (!in_progress(c))
                return 0;
        if (!c->machine)
                return refuse(c, "MachineNotFound", "no Machine owns MaasRemediation %s", c->name);
        if (deleting(c->machine))
                return refuse(c, "MachineDeleting", "Machine %s is being deleted",
                              kube_object_name(c->machine));
        cause = reconciler_pause_cause(c->cluster ? kube_object_json(c->cluster) : NULL, c->cur);
        if (cause) {
                char msg[256];

                (void)snprintf(msg, sizeof(msg), "remediation is held: %s", cause);
                disallow(c, SCHEMA_REASON_PAUSED, msg, false);
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, PAUSE_POLL_MS };
                return flush(c);
        }
        if (!c->system_id)
                return refuse(c, "NoMAASMachine", "Machine %s has no MAAS machine (systemID)",
                              kube_object_name(c->machine));
        /* the cluster's MAAS (spec.identityRef): the power cycle reaches the machine there */
        if (!reconciler_maas_pick(c->w, c->ns, c->cluster ? kube_object_name(c->cluster) : NULL,
                                  NULL, &c->conds, c->cur, res))
                return flush(c);
        if (phase_is(c, SCHEMA_REMEDIATION_WAITING))
                return waiting(c, res);
        return cycle(c, res);
}

/* The strategy as the controller reads it: the webhook's defaults when a member is absent
 * (an object written without the mutating webhook). */
static void read_strategy(struct remediation_ctx *c)
{
        const struct maas_remediation_strategy *st = c->r.spec.strategy;
        uint64_t ms = 0;

        c->retry_limit = st && st->has_retry_limit && st->retry_limit >= 0
                                 ? st->retry_limit
                                 : SCHEMA_REMEDIATION_RETRY_LIMIT;
        if (!st || !st->timeout || parse_duration_ms(st->timeout, &ms) != 0 || ms == 0)
                (void)!parse_duration_ms(SCHEMA_REMEDIATION_TIMEOUT, &ms);
        c->timeout_ms = ms;
}

/* The Machine, its Cluster and the MAAS system id of its MaasMachine, from the caches. */
static void read_machine(struct remediation_ctx *c)
{
        const char *mm;

        c->machine = reconciler_owner(c->p, &c->r.meta, "Machine");
        if (!c->machine)
                return;
        c->cluster = reconciler_cluster_of(c->p, c->ns, kube_object_json(c->machine));
        mm = capi_ref_name(&c->p->capi, kube_object_json(c->machine), "infrastructureRef",
                           SCHEMA_GROUP, SCHEMA_KIND_MACHINE);
        c->mm = mm ? informer_get(c->p->maasmachines, c->ns, mm) : NULL;
        c->system_id =
                c->mm ? json_find_str(kube_object_json(c->mm), "spec", "systemID", NULL) : NULL;
        if (c->system_id && !*c->system_id)
                c->system_id = NULL;
}

int maasremediation_reconcile(void *wctx,
                              const char *ns,
                              const char *name,
                              struct reconcile_result *res)
{
        struct reconciler_worker *w = wctx;
        struct remediation_ctx c = { .w = w, .p = w->p, .ns = ns, .name = name };
        int err = 0;

        c.conds = (struct reconciler_conditions){ .list = &c.r.status.conditions,
                                                  .status_present = &c.r.status.present,
                                                  .generation = &c.r.meta.generation,
                                                  .now = &c.now };
        maas_remediation_init(&c.r);
        c.now = (time_t)clock_wall_s(w->p->clock);
        c.obj = w->p->maasremediations ? informer_get(w->p->maasremediations, ns, name) : NULL;
        if (!c.obj) {
                track(w->p, ns, name, false);
                return 0;
        }
        if (maas_remediation_decode(kube_object_json(c.obj), &c.r, NULL) != 0) {
                log_warn(LOGGER, "cannot decode the MaasRemediation", "object=%s/%s", ns, name);
                goto out;
        }
        c.cur = cJSON_Duplicate(kube_object_json(c.obj), true);
        read_strategy(&c);
        read_machine(&c);
        err = pass(&c, res);
        if (err)
                log_info(LOGGER, "reconcile failed", "object=%s/%s error=%s", ns, name,
                         maas_strerror(err));
        track(w->p, ns, name, !c.r.meta.deletion_timestamp && in_progress(&c));
out:
        reconciler_worker_use_default(w);
        kube_object_unref(c.obj);
        kube_object_unref(c.machine);
        kube_object_unref(c.cluster);
        kube_object_unref(c.mm);
        maas_remediation_release(&c.r);
        cJSON_Delete(c.cur);
        return err;
}
