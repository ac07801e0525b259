/*
 * maasmachine_maas: the MAAS side of a MaasMachine reconcile — find or adopt the machine stamped
 * with this MaasMachine, allocate with every constraint, deploy, replace a failed deploy,
 * power policy, release on delete (upstream-capmaas.md §3.5; beyond.md B2–B4).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "clock.h"
#include "err.h"
#include "log.h"
#include "maasmachine.h"
#include "metrics.h"
#include "xalloc.h"

#define NODE_ZONE_LABEL "topology.kubernetes.io/zone"

#define LOGGER "maasmachine"

static void strv_copy(const struct maas_strv *src, struct maas_strv *dst)
{
        dst->n = src->n;
        dst->v = src->n ? xcalloc(src->n, sizeof(char *)) : NULL;
        for (size_t i = 0; i < src->n; i++)
                dst->v[i] = xstrdup(src->v[i]);
}

static char *dup_or_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

void maasmachine_node_copy(const struct maas_node *src, struct maas_node *dst)
{
        *dst = *src;
        dst->system_id = dup_or_null(src->system_id);
        dst->hostname = dup_or_null(src->hostname);
        dst->fqdn = dup_or_null(src->fqdn);
        dst->zone = dup_or_null(src->zone);
        dst->pool = dup_or_null(src->pool);
        dst->status_name = dup_or_null(src->status_name);
        dst->power_state = dup_or_null(src->power_state);
        dst->power_type = dup_or_null(src->power_type);
        dst->osystem = dup_or_null(src->osystem);
        dst->distro_series = dup_or_null(src->distro_series);
        dst->owner = dup_or_null(src->owner);
        dst->owner_data = src->owner_data ? cJSON_Duplicate(src->owner_data, true) : NULL;
        strv_copy(&src->tags, &dst->tags);
        strv_copy(&src->ip_addresses, &dst->ip_addresses);
}

static void set_node(struct maasmachine_ctx *c, struct maas_node *n)
{
        if (c->have_node)
                maas_node_release(&c->node);
        c->node = *n;
        *n = (struct maas_node){ 0 };
        c->have_node = true;
}

static void drop_node(struct maasmachine_ctx *c)
{
        if (c->have_node)
                maas_node_release(&c->node);
        c->node = (struct maas_node){ 0 };
        c->have_node = false;
}

/* --- the fleet snapshot (B6) ------------------------------------------------------------ */

#define FLEET_CHUNK 100

struct fleet_ids {
        char **ids;
        size_t n, cap;
};

/* informer_each: keeps the systemID of a Deployed MaasMachine. */
static void fleet_id_of(void *arg, struct kube_object *obj)
{
        struct fleet_ids *f = arg;
        const cJSON *o = kube_object_json(obj);
        const char *sid = json_find_str(o, "spec", "systemID", NULL);
        const char *st = json_find_str(o, "status", "machineState", NULL);

        if (!sid || !st || strcmp(st, "Deployed") != 0)
                return;
        if (f->n == f->cap) {
                f->cap = f->cap ? f->cap * 2 : 64;
                f->ids = xrealloc(f->ids, f->cap * sizeof(*f->ids));
        }
        f->ids[f->n++] = xstrdup(sid);
}

/* The systemIDs of every Deployed MaasMachine, reading the cache one object at a time. */
static void fleet_ids(struct provider *p, char ***ret, size_t *ret_n)
{
        struct fleet_ids f = { 0 };

        (void)informer_each(p->maasmachines, NULL, NULL, fleet_id_of, &f);
        *ret = f.ids;
        *ret_n = f.n;
}

static int cmp_node_id(const void *a, const void *b)
{
        return strcmp(((const struct maas_node *)a)->system_id,
                      ((const struct maas_node *)b)->system_id);
}

/* Lists every Deployed machine we hold, 100 ids a call, sorted by system_id. Runs without
 * the fleet lock: lookups go on against the previous list meanwhile. */
static int fleet_fetch(struct reconciler_worker *w, struct maas_node_list *ret)
{
        struct provider *p = w->p;
        struct maas_node_list all = { 0 };
        struct maas_error me = { 0 };
        char **ids = NULL;
        size_t n = 0;
        int err = 0;

        fleet_ids(p, &ids, &n);
        for (size_t off = 0; off < n && err == 0; off += FLEET_CHUNK) {
                struct maas_node_list part = { 0 };
                size_t m = n - off < FLEET_CHUNK ? n - off : FLEET_CHUNK;
                struct maas_node_filter f = { .ids = (const char *const *)ids + off, .n_ids = m };

                err = maas_list_machines(w->maas, &f, &part, &me);
                reconciler_maas_count(p, "list_machines", err, &me);
                maas_error_release(&me);
                if (err == 0)
                        maas_node_list_append(&all, &part);
        }
        for (size_t i = 0; i < n; i++)
                free(ids[i]);
        free(ids);
        if (err) {
                maas_node_list_release(&all);
                return err;
        }
        if (all.n > 1)
                qsort(all.items, all.n, sizeof(*all.items), cmp_node_id);
        *ret = all;
        return 0;
}

/* Whether this caller should fetch the next list: the list is due and nobody else is
 * fetching it. Lock held. */
static bool fleet_claim(struct provider *p, uint64_t now)
{
        if (p->fleet.refreshing ||
            (p->fleet.fetched_ms && now - p->fleet.fetched_ms < p->settings.machine_refresh_ms))
                return false;
        p->fleet.refreshing = true;
        return true;
}

static void fleet_refresh(struct reconciler_worker *w)
{
        struct provider *p = w->p;
        struct maas_node_list all = { 0 };
        int err = fleet_fetch(w, &all);

        pthread_mutex_lock(&p->fleet_lock);
        if (err == 0) {
                maas_node_list_release(&p->fleet.nodes);
                p->fleet.nodes = all;
                p->fleet.valid = true;
        }
        /* after a failure too: the next attempt waits an interval, lookups fall back to a
         * GET per machine meanwhile only if no list was ever fetched */
        p->fleet.fetched_ms = clock_now_ms(p->clock);
        p->fleet.refreshing = false;
        pthread_mutex_unlock(&p->fleet_lock);
}

int reconciler_fleet_lookup(struct reconciler_worker *w,
                            const char *system_id,
                            struct maas_node *ret)
{
        struct provider *p = w->p;
        struct maas_node key = { .system_id = (char *)(uintptr_t)system_id };
        const struct maas_node *hit;
        bool fetch;
        int err = CM_ENOTFOUND;

        pthread_mutex_lock(&p->fleet_lock);
        fetch = fleet_claim(p, clock_now_ms(p->clock));
        pthread_mutex_unlock(&p->fleet_lock);
        if (fetch)
                fleet_refresh(w);
        pthread_mutex_lock(&p->fleet_lock);
        hit = p->fleet.valid ? bsearch(&key, p->fleet.nodes.items, p->fleet.nodes.n,
                                       sizeof(*p->fleet.nodes.items), cmp_node_id)
                             : NULL;
        if (hit) {
                maasmachine_node_copy(hit, ret);
                err = 0;
        }
        pthread_mutex_unlock(&p->fleet_lock);
        return err;
}

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

        if (!c->mm.meta.uid)
                return 0;
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
                        log_info(LOGGER, "adopting the MAAS machine stamped with this MaasMachine",
                                 "object=%s/%s system_id=%s", c->ns, c->name, n->system_id);
                        maasmachine_set_ids(c, n->zone, n->system_id);
                        set_node(c, n);
                        continue;
                }
                log_warn(LOGGER, "releasing a second machine stamped with this MaasMachine",
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
         * steady state, never for deciding a release. */
        if (sid && steady(c) && !c->mm.meta.deletion_timestamp)
                err = reconciler_fleet_lookup(c->w, sid, &n);
        if (sid && err == CM_ENOTFOUND) {
                err = maas_get_machine(c->w->maas, sid, &n, &me);
                reconciler_maas_count(c->p, "get_machine", err, &me);
        }
        maas_error_release(&me);
        if (sid && err == 0) {
                set_node(c, &n);
                return 0;
        }
        if (sid && err != CM_ENOTFOUND)
                return err;
        if (sid && !c->mm.meta.deletion_timestamp) {
                maasmachine_event(c, "Warning", "MachineNotFound",
                                  "MAAS machine %s no longer exists; allocating another", sid);
        }
        if (sid)
                maasmachine_set_ids(c, NULL, NULL);
        return adopt(c, NULL);
}

/* --- allocate ---------------------------------------------------------------------------- */

static const char *zone_of(const struct maasmachine_ctx *c)
{
        if (c->mm.spec.failure_domain && *c->mm.spec.failure_domain)
                return c->mm.spec.failure_domain;
        return json_find_str(kube_object_json(c->machine), "spec", "failureDomain", NULL);
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
}

static void stamp_owner_data(struct maasmachine_ctx *c, const char *sid)
{
        const char *keys[] = { "capmaas-cluster", "capmaas-namespace", "capmaas-machine" };
        const char *vals[] = { kube_object_name(c->cluster), c->ns, c->name };
        struct maas_error me = { 0 };
        int err;

        err = maas_set_owner_data(c->w->maas, sid, keys, vals, 3, NULL, &me);
        reconciler_maas_count(c->p, "set_owner_data", err, &me);
        if (err)
                log_warn(LOGGER, "cannot set owner data", "system_id=%s error=%s", sid,
                         maas_strerror(err));
        maas_error_release(&me);
}

static int allocate_failed(struct maasmachine_ctx *c,
                           int err,
                           const struct maas_error *me,
                           struct reconcile_result *res)
{
        char what[384];

        describe_constraints(c, what, sizeof(what));
        if (err == MAAS_ENOMATCH) {
                maasmachine_cond(c, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                 SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                                 "no free MAAS machine matches %s; retrying", what);
                maasmachine_event(c, "Warning", "NoMachineAvailable",
                                  "no free MAAS machine matches %s", what);
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = 60000;
                return 0;
        }
        if (me->message && strstr(me->message, "Invalid transition: Broken")) {
                maasmachine_cond(c, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                 SCHEMA_REASON_MACHINE_DEPLOYING, "retrying after broken machine");
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = 120000;
                return 0;
        }
        maasmachine_cond(c, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                         SCHEMA_REASON_MACHINE_DEPLOY_FAILED, "unable to allocate a machine: %s",
                         me->message ? me->message : maas_strerror(err));
        return err;
}

int maasmachine_allocate(struct maasmachine_ctx *c, struct reconcile_result *res, bool *ret_got)
{
        const struct maas_machine_spec *s = &c->mm.spec;
        char *comment = xasprintf("capmaas %s/%s", c->ns, c->name);
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
        };
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        int err;

        *ret_got = false;
        err = maas_allocate(c->w->maas, &o, &n, &me);
        reconciler_maas_count(c->p, "allocate", err, &me);
        if (err) {
                err = allocate_failed(c, err, &me, res);
                goto out;
        }
        stamp_owner_data(c, n.system_id);
        maasmachine_set_ids(c, n.zone, n.system_id);
        (void)snprintf(started, sizeof(started), "%lld", (long long)c->now);
        maasmachine_set_annotation(c, RECONCILER_ANNOTATION_DEPLOY_STARTED, started);
        maasmachine_event(c, "Normal", "MachineAllocated",
                          "Allocated MAAS machine %s (%s) in zone %s", n.system_id,
                          n.hostname ? n.hostname : "", n.zone ? n.zone : "");
        set_node(c, &n);
        *ret_got = true;
        /* Persist the providerID before anything else happens to the machine. */
        err = maasmachine_flush(c, true);
out:
        maas_node_release(&n);
        maas_error_release(&me);
        free(comment);
        return err;
}

/* --- deploy ------------------------------------------------------------------------------ */

static int bootstrap_data(struct maasmachine_ctx *c, char **ret, size_t *ret_len)
{
        const char *secret = json_find_str(kube_object_json(c->machine), "spec", "bootstrap",
                                           "dataSecretName", NULL);
        cJSON *obj = NULL;
        const char *b64;
        int err;

        err = kube_get(c->w->kube, &KUBE_RES_SECRETS, c->ns, secret, &obj, NULL);
        if (err)
                goto out;
        b64 = json_find_str(obj, "data", "value", NULL);
        if (!b64) {
                err = CM_EINVAL;
                goto out;
        }
        err = base64_decode(b64, strlen(b64), (unsigned char **)ret, ret_len);
out:
        if (err)
                maasmachine_event(c, "Warning", "FailedGetBootstrapData",
                                  "error retrieving bootstrap data from secret %s: %s", secret,
                                  err == CM_EINVAL ? "secret value key is missing"
                                                   : cm_strerror(err));
        cJSON_Delete(obj);
        return err;
}

static void rollback(struct maasmachine_ctx *c,
                     const char *sid,
                     const char *what,
                     int err,
                     const struct maas_error *me)
{
        char *id = xstrdup(sid);

        (void)!maasmachine_release(c, id);
        maasmachine_set_ids(c, NULL, NULL);
        drop_node(c);
        maasmachine_cond(c, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                         SCHEMA_REASON_MACHINE_DEPLOY_FAILED, "%s on MAAS machine %s failed: %s",
                         what, id, me && me->message ? me->message : maas_strerror(err));
        maasmachine_event(c, "Warning", "MachineDeployFailed",
                          "%s on MAAS machine %s failed; released it", what, id);
        free(id);
}

static int deploy_calls(struct maasmachine_ctx *c, const char *sid, const char *ud, size_t ud_len)
{
        struct maas_deploy_opts o = {
                .image = c->mm.spec.image,
                .user_data = ud,
                .user_data_len = ud_len,
                .ephemeral_deploy = c->mm.spec.has_deploy_in_memory && c->mm.spec.deploy_in_memory,
        };
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        int err;

        err = maas_update_machine(c->w->maas, sid, &(struct maas_update_opts){ .swap_size = 0 },
                                  NULL, &me);
        reconciler_maas_count(c->p, "update_machine", err, &me);
        if (err) {
                rollback(c, sid, "Disabling swap", err, &me);
                goto out;
        }
        err = maas_deploy(c->w->maas, sid, &o, &n, &me);
        reconciler_maas_count(c->p, "deploy", err, &me);
        if (err) {
                rollback(c, sid, "Deploy", err, &me);
                goto out;
        }
        maasmachine_event(c, "Normal", "MachineDeploying", "Deploying %s on MAAS machine %s (%s)",
                          c->mm.spec.image ? c->mm.spec.image : "", sid,
                          n.hostname ? n.hostname : "");
        set_node(c, &n);
out:
        maas_node_release(&n);
        maas_error_release(&me);
        return err;
}

int maasmachine_deploy(struct maasmachine_ctx *c)
{
        char *ud = NULL, *sid = xstrdup(c->node.system_id);
        size_t len = 0;
        int err;

        maasmachine_cond(c, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                         SCHEMA_REASON_MACHINE_DEPLOY_STARTED, "deploying MAAS machine %s", sid);
        err = bootstrap_data(c, &ud, &len);
        if (err == 0)
                err = deploy_calls(c, sid, ud, len);
        free(ud);
        free(sid);
        return err;
}

/* --- release and replace ----------------------------------------------------------------- */

int maasmachine_release(struct maasmachine_ctx *c, const char *system_id)
{
        struct maas_release_opts o = {
                .erase = c->p->settings.release_erase,
                .quick_erase = c->p->settings.release_quick_erase,
                .comment = "released by capmaas",
        };
        struct maas_error me = { 0 };
        int err;

        err = maas_release(c->w->maas, system_id, &o, NULL, &me);
        reconciler_maas_count(c->p, "release", err, &me);
        if (err == CM_ENOTFOUND)
                err = 0;
        if (err)
                log_warn(LOGGER, "release failed", "system_id=%s error=%s", system_id,
                         me.message ? me.message : maas_strerror(err));
        maas_error_release(&me);
        return err;
}

int maasmachine_replace(struct maasmachine_ctx *c, const char *why, struct reconcile_result *res)
{
        char *old = xstrdup(c->node.system_id);
        bool got = false;
        int err;

        if (c->p->replaced)
                metric_counter_inc(metric_series(c->p->replaced, why));
        drop_node(c);
        /* Allocate the replacement while still holding the failed machine, so MAAS cannot
         * hand the same one back. */
        err = adopt(c, old);
        if (err == 0 && !c->have_node)
                err = maasmachine_allocate(c, res, &got);
        if (maasmachine_release(c, old) == 0)
                maasmachine_event(c, "Warning", "MachineReplaced",
                                  "MAAS machine %s: %s; released it%s%s", old,
                                  strcmp(why, "DeployTimeout") == 0 ? "deploy deadline passed"
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
        err = maasmachine_deploy(c);
        if (err == 0) {
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = 1000;
        }
        return err;
}

/* --- power (B4) -------------------------------------------------------------------------- */

#define POWER_ON_MIN_INTERVAL_S 300
/* Spacing of the two fresh BMC readings that must both say "off" before a power-on. */
#define POWER_CONFIRM_MS        3000

static int query_power(struct maasmachine_ctx *c, char **ret)
{
        struct maas_error me = { 0 };
        int err = maas_query_power_state(c->w->maas, c->node.system_id, ret, &me);

        reconciler_maas_count(c->p, "query_power_state", err, &me);
        maas_error_release(&me);
        return err;
}

/* Counts a confirmed "off"; true when this is the second in a row and no power-on was sent
 * in the last POWER_ON_MIN_INTERVAL_S. */
static bool count_off(struct maasmachine_ctx *c, bool off)
{
        struct provider *p = c->p;
        struct reconciler_entry *e;
        bool act = false;

        pthread_mutex_lock(&p->lock);
        e = reconciler_table_put(&p->power_off_reads, c->node.system_id);
        e->a = off ? e->a + 1 : 0;
        if (e->a >= 2 && c->now - e->b >= POWER_ON_MIN_INTERVAL_S) {
                act = true;
                e->a = 0;
                e->b = c->now;
        }
        pthread_mutex_unlock(&p->lock);
        return act;
}

static int power_on(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        struct maas_error me = { 0 };
        int err = maas_power_on(c->w->maas, c->node.system_id, "capmaas: powered off", NULL, &me);

        reconciler_maas_count(c->p, "power_on", err, &me);
        maas_error_release(&me);
        if (err)
                return err;
        maasmachine_event(c, "Normal", "MachinePoweredOn",
                          "MAAS machine %s was confirmed off twice; powering it on",
                          c->node.system_id);
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = 60000;
        return 0;
}

int maasmachine_power(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        char *state = NULL;
        int err = query_power(c, &state);

        if (err)
                return err;
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = POWER_CONFIRM_MS;
        if (strcmp(state, "on") == 0) {
                (void)count_off(c, false);
                c->mm.status.machine_powered = true;
        } else if (strcmp(state, "off") == 0) {
                maasmachine_cond(c, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                 SCHEMA_REASON_MACHINE_POWERED_OFF,
                                 "MAAS machine %s is powered off", c->node.system_id);
                if (count_off(c, true))
                        err = power_on(c, res);
        } else {
                (void)count_off(c, false);
                maasmachine_event(c, "Warning", "PowerStateUnknown",
                                  "MAAS reports power state %s for machine %s; leaving it alone",
                                  state, c->node.system_id);
                res->after_ms = 60000;
        }
        free(state);
        return err;
}

/* --- DNS and the workload Node ------------------------------------------------------------ */

static char *endpoint_fqdn(struct maasmachine_ctx *c)
{
        const char *infra = json_find_str(kube_object_json(c->cluster), "spec", "infrastructureRef",
                                          "name", NULL);
        struct kube_object *mc = infra ? informer_get(c->p->maasclusters, c->ns, infra) : NULL;
        const char *dns =
                mc ? json_find_str(kube_object_json(mc), "status", "network", "dnsName", NULL)
                   : NULL;
        char *out = dns ? xstrdup(dns) : NULL;

        if (mc && c->p->cluster_ctl)
                controller_enqueue(c->p->cluster_ctl, c->ns, kube_object_name(mc));
        kube_object_unref(mc);
        return out;
}

int maasmachine_dns_registered(struct maasmachine_ctx *c, bool *ret)
{
        char *fqdn = c->cluster ? endpoint_fqdn(c) : NULL;
        struct maas_dns_list l = { 0 };
        struct maas_error me = { 0 };
        bool found = false;
        int err = 0;

        if (!fqdn)
                goto out;
        err = maas_list_dns_resources(c->w->maas, fqdn, &l, &me);
        reconciler_maas_count(c->p, "list_dns_resources", err, &me);
        for (size_t i = 0; err == 0 && i < l.n; i++)
                for (size_t j = 0; j < l.items[i].ips.n; j++)
                        for (size_t k = 0; c->have_node && k < c->node.ip_addresses.n; k++)
                                found = found ||
                                        strcmp(l.items[i].ips.v[j], c->node.ip_addresses.v[k]) == 0;
out:
        if (err == 0)
                *ret = found;
        maas_dns_list_release(&l);
        maas_error_release(&me);
        free(fqdn);
        return err;
}

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
                maasmachine_event(c, "Warning", "NodeProviderIDConflict",
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
                maasmachine_event(c, "Warning", "NodeProviderUpdateFailed",
                                  "Unable to set the providerID of Node %s: %s",
                                  kube_meta_str(node, "name"), cm_strerror(err));
        return err;
}

int maasmachine_node_provider_id(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        struct kube_config cfg = { 0 };
        struct kube_client *wl = NULL;
        cJSON *node = NULL;
        int err;

        if (!c->node.hostname || !c->mm.spec.provider_id ||
            node_done(c->p, c->node.system_id, false))
                return 0;
        err = reconciler_workload_client(c->w, c->ns, kube_object_name(c->cluster), &cfg, &wl);
        if (err == 0)
                err = find_node(wl, c->node.hostname, &node);
        if (err == 0)
                err = patch_node(c, wl, node);
        if (err == 0)
                (void)node_done(c->p, c->node.system_id, true);
        else {
                res->outcome = RECONCILE_REQUEUE_AFTER;
                res->after_ms = err == CM_ENOTFOUND ? 5000 : 30000;
        }
        cJSON_Delete(node);
        kube_client_free(wl);
        kube_config_release(&cfg);
        return 0;
}
