/*
 * maasmachine_compose: a MaasMachine with spec.lxd.enabled is a virtual machine composed on
 * a MAAS VM host instead of an allocated server (docs/lxd.md). The VM's hostname is derived
 * from the MaasMachine (its name and UID) and is how it is found again: compose is never
 * repeated while MAAS holds a machine of that hostname, so a crash before the answer (or
 * before the system id was written) leads to the VM being adopted, never to a second one.
 * A composed VM is commissioned by MAAS, then allocated by system id with the MaasMachine's
 * UID as agent_name (the allocation stamp every other step knows), then deployed like any
 * machine. On delete it is deleted (MAAS decomposes it: a released VM would keep its share
 * of the host).
 *
 * Spreading: the host a VM was composed on is kept in an annotation; a cluster's VMs go to
 * the host holding the fewest of them, counted from its MaasMachines' annotations and from
 * this process's choices not yet in the cache (p->vm_hosts, under p->lock), so workers
 * choosing at the same moment do not pile onto one host.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "fleet_snapshot.h"
#include "json.h"
#include "log.h"
#include "maas_pods.h"
#include "maasmachine_context.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

#define LOGGER MAASMACHINE_LOGGER

/* The VM host (its MAAS name) a MaasMachine's VM was composed on. */
#define ANNOTATION_VM_HOST  "maas.infrastructure.cluster.x-k8s.io/vm-host"
/* The no-fit backoff: "<failures> <not before, unix s>". */
#define ANNOTATION_VM_RETRY "maas.infrastructure.cluster.x-k8s.io/vm-compose-retry"

#define REASON_NO_HOST   "VMHostUnavailable"
#define REASON_COMPOSING "VMComposing"

#define DEFAULT_DISK_GB   60   /* the reference's vmConfig.diskSize default */
#define DEFAULT_MEM_MIB   2048 /* MAAS's default for a composed VM */
#define COMMISSION_POLL   5000 /* ms between looks at a commissioning VM */
#define HOSTNAME_NAME_MAX 40

bool maasmachine_is_vm(const struct maasmachine_ctx *c)
{
        return c->mm.spec.lxd && c->mm.spec.lxd->enabled;
}

bool maasmachine_node_is_vm(const struct maas_node *n)
{
        return n->power_type &&
               (strcmp(n->power_type, "lxd") == 0 || strcmp(n->power_type, "virsh") == 0);
}

char *maasmachine_vm_hostname(const char *name, const char *uid)
{
        char *out = xcalloc(HOSTNAME_NAME_MAX + 16, 1);
        size_t k = 0;

        for (const char *s = name ? name : ""; *s && k < HOSTNAME_NAME_MAX; s++) {
                char ch = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
                bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');

                if (alnum)
                        out[k++] = ch;
                else if (k && out[k - 1] != '-')
                        out[k++] = '-';
        }
        while (k && out[k - 1] == '-')
                k--;
        if (!k)
                out[k++] = 'v';
        out[k++] = '-';
        for (const char *s = uid ? uid : ""; *s && k < HOSTNAME_NAME_MAX + 9; s++)
                if ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9'))
                        out[k++] = *s;
        if (out[k - 1] == '-')
                out[k++] = '0';
        out[k] = '\0';
        return out;
}

/* The VM's hostname: the one the reference provider recorded (maas.spectrocloud.com/vm-name,
 * a VM it may have composed before capmaas took over), else ours. New string. */
static char *vm_hostname_of(const struct maasmachine_ctx *c)
{
        const char *ref = schema_strmap_get(&c->mm.meta.annotations, SCHEMA_ANNOTATION_VM_NAME);
        bool ok = ref && *ref && strlen(ref) <= 63 && ref[0] != '-';

        for (const char *s = ref; ok && *s; s++)
                ok = (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-';
        return ok ? xstrdup(ref) : maasmachine_vm_hostname(c->name, c->mm.meta.uid);
}

/* The zone to compose in: where Cluster API placed the Machine, else the MaasMachine's own. */
static const char *zone_of(const struct maasmachine_ctx *c)
{
        const char *placed = capi_machine_failure_domain(kube_object_json(c->machine));

        if (placed)
                return placed;
        if (c->mm.spec.failure_domain && *c->mm.spec.failure_domain)
                return c->mm.spec.failure_domain;
        return NULL;
}

static void vm_request(const struct maasmachine_ctx *c, struct maas_vm_request *rq)
{
        const struct maas_machine_spec *s = &c->mm.spec;
        const struct maas_vm_config *vc = s->lxd ? s->lxd->vm_config : NULL;
        int64_t disk = vc && vc->has_disk_size ? vc->disk_size : DEFAULT_DISK_GB;

        if (s->has_min_disk_size && s->min_disk_size > disk)
                disk = s->min_disk_size;
        *rq = (struct maas_vm_request){
                .cores = s->has_min_cpu && s->min_cpu > 0 ? s->min_cpu : 1,
                .memory_mib =
                        s->has_min_memory && s->min_memory > 0 ? s->min_memory : DEFAULT_MEM_MIB,
                .disk_gb = disk > 0 ? disk : DEFAULT_DISK_GB,
                .zone = zone_of(c),
                .pool = s->resource_pool && *s->resource_pool ? s->resource_pool : NULL,
                .tags = (const char *const *)s->tags.items,
                .n_tags = s->tags.n,
                .not_tags = (const char *const *)s->exclude_tags.items,
                .n_not_tags = s->exclude_tags.n,
                .arch = s->architecture && *s->architecture ? s->architecture : NULL,
                .host_system_id = s->parent && *s->parent ? s->parent : NULL,
                .storage_pool =
                        vc && vc->storage_pool && *vc->storage_pool ? vc->storage_pool : NULL,
        };
}

static void describe(const struct maas_vm_request *rq, char *out, size_t len)
{
        size_t k = (size_t)snprintf(out, len, "cores=%lld memory=%lldMiB disk=%lldGB",
                                    (long long)rq->cores, (long long)rq->memory_mib,
                                    (long long)rq->disk_gb);

        if (rq->zone && k < len)
                k += (size_t)snprintf(out + k, len - k, " zone=%s", rq->zone);
        if (rq->pool && k < len)
                k += (size_t)snprintf(out + k, len - k, " pool=%s", rq->pool);
        for (size_t i = 0; i < rq->n_tags && k < len; i++)
                k += (size_t)snprintf(out + k, len - k, "%s%s", i ? "," : " tags=", rq->tags[i]);
        for (size_t i = 0; i < rq->n_not_tags && k < len; i++)
                k += (size_t)snprintf(out + k, len - k, "%s%s",
                                      i ? "," : " excludeTags=", rq->not_tags[i]);
        if (rq->arch && k < len)
                k += (size_t)snprintf(out + k, len - k, " architecture=%s", rq->arch);
        if (rq->host_system_id && k < len)
                k += (size_t)snprintf(out + k, len - k, " parent=%s", rq->host_system_id);
        if (rq->storage_pool && k < len)
                (void)snprintf(out + k, len - k, " storagePool=%s", rq->storage_pool);
}

/* --- backoff ------------------------------------------------------------------------------ */

/* The backoff of a VM no host fits (or a MAAS without VM hosts). */
#define VM_BACKOFF(c) \
        (&(const struct maasmachine_backoff){ ANNOTATION_VM_RETRY, &(c)->p->vm_retry, 0 })

/* --- spreading ------------------------------------------------------------------------------ */

struct count_ctx {
        const struct maas_pod_list *hosts;
        size_t *counts;
        const char *self_uid;
        char **counted; /* names of the MaasMachines whose annotation was counted; owned */
        size_t n_counted, cap_counted;
};

static bool was_counted(const struct count_ctx *cc, const char *name)
{
        for (size_t i = 0; name && i < cc->n_counted; i++)
                if (strcmp(cc->counted[i], name) == 0)
                        return true;
        return false;
}

static void count_host(const struct maas_pod_list *hosts, size_t *counts, const char *name)
{
        for (size_t i = 0; name && i < hosts->n; i++)
                if (strcmp(hosts->items[i].name, name) == 0)
                        counts[i]++;
}

static void count_sibling(void *arg, struct kube_object *obj)
{
        struct count_ctx *cc = arg;
        const cJSON *o = kube_object_json(obj);
        const char *uid = json_find_str(o, "metadata", "uid", NULL);

        const char *host = json_find_str(o, "metadata", "annotations", ANNOTATION_VM_HOST, NULL);

        if ((uid && cc->self_uid && strcmp(uid, cc->self_uid) == 0) || !host)
                return;
        count_host(cc->hosts, cc->counts, host);
        if (cc->n_counted == cc->cap_counted) {
                cc->cap_counted = cc->cap_counted ? 2 * cc->cap_counted : 8;
                cc->counted = xrealloc(cc->counted, cc->cap_counted * sizeof(*cc->counted));
        }
        cc->counted[cc->n_counted++] = xstrdup(kube_object_name(obj));
}

static char *placement_prefix(const struct maasmachine_ctx *c)
{
        return xasprintf("%s/%s/", c->ns, kube_object_name(c->cluster));
}

/* Counts of the cluster's VMs per host: the annotations in the cache, then this process's
 * choices (p->vm_hosts: "ns/cluster/uid" → a: host id) whose MaasMachines that pass did not
 * count (the cache may not show the annotation yet, or not list the MaasMachine under the
 * cluster yet). Caller holds p->lock; the informer pass takes only the informer's own lock. */
static void count_cluster_vms(struct maasmachine_ctx *c,
                              const struct maas_pod_list *hosts,
                              size_t *counts)
{
        struct count_ctx cc = { .hosts = hosts, .counts = counts, .self_uid = c->mm.meta.uid };
        char *prefix = placement_prefix(c);
        size_t plen = strlen(prefix);
        size_t *cached = xcalloc(hosts->n ? hosts->n : 1, sizeof(*cached));

        (void)informer_each(c->p->maasmachines, c->ns, kube_object_name(c->cluster), count_sibling,
                            &cc);
        for (size_t i = 0; i < c->p->vm_hosts.n; i++) {
                const struct reconciler_entry *e = &c->p->vm_hosts.items[i];
                const char *uid = e->key + plen;

                if (strncmp(e->key, prefix, plen) != 0 ||
                    (c->mm.meta.uid && strcmp(uid, c->mm.meta.uid) == 0) ||
                    was_counted(&cc, e->ptr))
                        continue;
                for (size_t h = 0; h < hosts->n; h++)
                        if (hosts->items[h].id == e->a)
                                cached[h]++;
        }
        for (size_t h = 0; h < hosts->n; h++)
                counts[h] += cached[h];
        for (size_t i = 0; i < cc.n_counted; i++)
                free(cc.counted[i]);
        free(cc.counted);
        free(cached);
        free(prefix);
}

static void remember_placement(struct maasmachine_ctx *c, int host_id)
{
        char *prefix = placement_prefix(c);
        char *key = xasprintf("%s%s", prefix, c->mm.meta.uid ? c->mm.meta.uid : c->name);
        struct reconciler_entry *e = reconciler_table_put(&c->p->vm_hosts, key);

        e->a = host_id;
        if (!e->ptr) /* the MaasMachine's name, for the cache lookup (freed by forget) */
                e->ptr = xstrdup(c->name);
        free(key);
        free(prefix);
}

void maasmachine_vm_forget(struct maasmachine_ctx *c)
{
        char *prefix, *key;
        struct reconciler_entry *e;

        if (!c->cluster)
                return;
        prefix = placement_prefix(c);
        key = xasprintf("%s%s", prefix, c->mm.meta.uid ? c->mm.meta.uid : c->name);
        pthread_mutex_lock(&c->p->lock);
        e = reconciler_table_get(&c->p->vm_hosts, key);
        if (e) {
                free(e->ptr);
                reconciler_table_del(&c->p->vm_hosts, key);
        }
        if (c->mm.meta.uid)
                reconciler_table_del(&c->p->vm_retry, c->mm.meta.uid);
        pthread_mutex_unlock(&c->p->lock);
        free(key);
        free(prefix);
}

/* --- choosing and composing --------------------------------------------------------------------
 */

static void no_host(struct maasmachine_ctx *c,
                    const struct maas_pod_list *hosts,
                    const struct maas_vm_request *rq,
                    const struct maas_pod_choice *ch,
                    struct reconcile_result *res)
{
        char what[384];
        char *lacks = NULL, *msg;
        unsigned delay = maasmachine_backoff_fail(c, VM_BACKOFF(c));

        describe(rq, what, sizeof(what));
        if (ch->closest >= 0) {
                lacks = maas_pod_lacks_text(ch, rq);
                msg = xasprintf("no MAAS VM host fits %s: the closest, %s, lacks %s; retrying in "
                                "%us",
                                what, hosts->items[ch->closest].name, lacks, delay);
        } else {
                msg = xasprintf("no MAAS VM host in %s%s%s%s carries the tags asked for "
                                "(%zu host(s) in MAAS) to compose %s; retrying in %us",
                                rq->zone ? "zone " : "", rq->zone ? rq->zone : "",
                                rq->pool ? " pool " : "", rq->pool ? rq->pool : "", hosts->n, what,
                                delay);
        }
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        REASON_NO_HOST, "%s", msg);
        reconciler_event(c->p, c->cur, "Warning", "NoVMHostAvailable", "%s", msg);
        maasmachine_requeue(res, (uint64_t)delay * 1000u);
        free(msg);
        free(lacks);
}

/* MAAS refused the compose: a capacity refusal (503, PodProblem) backs off like no fit; a
 * taken hostname means the VM exists (the next pass finds it); anything else is returned. */
static int compose_failed(struct maasmachine_ctx *c,
                          const struct maas_pod *host,
                          int err,
                          const struct maas_error *me,
                          struct reconcile_result *res)
{
        const char *why = me->message && *me->message ? me->message : maas_strerror(err);
        unsigned delay;

        if (me->fields && cJSON_GetObjectItemCaseSensitive(me->fields, "hostname")) {
                maasmachine_requeue(res, 1000);
                return 0;
        }
        if (me->http_status == 503 || err == CM_EINVAL) {
                delay = maasmachine_backoff_fail(c, VM_BACKOFF(c));
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                REASON_NO_HOST,
                                "MAAS refused to compose the VM on host %s: %s; retrying in %us",
                                host->name, why, delay);
                reconciler_event(c->p, c->cur, "Warning", "VMComposeFailed",
                                 "MAAS refused to compose the VM on host %s: %s", host->name, why);
                maasmachine_requeue(res, (uint64_t)delay * 1000u);
                return 0;
        }
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        REASON_NO_HOST, "unable to compose the VM on host %s: %s", host->name, why);
        return err;
}

static int compose_on(struct maasmachine_ctx *c,
                      const struct maas_pod *host,
                      const struct maas_pod_choice *ch,
                      const struct maas_vm_request *rq,
                      const char *hostname,
                      struct reconcile_result *res)
{
        struct maas_compose_opts o = {
                .cores = rq->cores,
                .memory_mib = rq->memory_mib,
                .disk_gb = rq->disk_gb,
                .storage_pool = ch->pool,
                .architecture = ch->arch,
                .hostname = hostname,
                .zone_id = host->zone_id,
                .pool_id = host->pool_id,
        };
        struct maas_error me = { 0 };
        char *sid = NULL;
        int err;

        /* the host first, so a restart counts this VM where it goes */
        maasmachine_set_annotation(c, ANNOTATION_VM_HOST, host->name);
        err = maasmachine_flush(c, true);
        if (err)
                return err;
        if (c->mm.meta.uid) /* from now on only a list can tell what MAAS did */
                fleet_snapshot_allocating(c->p, c->mm.meta.uid);
        err = maas_compose(c->w->maas, host->id, &o, &sid, &me);
        reconciler_maas_count(c->p, "compose", err, &me);
        if (err) {
                err = compose_failed(c, host, err, &me, res);
                goto out;
        }
        maasmachine_backoff_clear(c, VM_BACKOFF(c));
        reconciler_event(c->p, c->cur, "Normal", "VMComposed",
                         "Composed VM %s (%s) on MAAS VM host %s", hostname, sid, host->name);
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        REASON_COMPOSING, "VM %s (%s) composed on host %s; commissioning", hostname,
                        sid, host->name);
        maasmachine_requeue(res, COMMISSION_POLL);
out:
        free(sid);
        maas_error_release(&me);
        return err;
}

static int choose_and_compose(struct maasmachine_ctx *c,
                              const char *hostname,
                              struct reconcile_result *res)
{
        struct maas_pod_list hosts = { 0 };
        struct maas_error me = { 0 };
        struct maas_vm_request rq;
        struct maas_pod_choice ch;
        size_t *counts = NULL;
        int err;

        if (maasmachine_backoff_wait(c, VM_BACKOFF(c), res))
                return 0; /* a no-fit backoff runs: its condition stays */
        vm_request(c, &rq);
        err = maas_list_pods(c->w->maas, &hosts, &me);
        reconciler_maas_count(c->p, "list_pods", err, &me);
        if (err) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                REASON_NO_HOST, "cannot list MAAS's VM hosts: %s",
                                err == CM_EUNSUPPORTED
                                        ? "this MAAS has no VM hosts (MAAS 3.8 removed them)"
                                        : (me.message ? me.message : maas_strerror(err)));
                if (err == CM_EUNSUPPORTED) {
                        maasmachine_requeue(
                                res, (uint64_t)maasmachine_backoff_fail(c, VM_BACKOFF(c)) * 1000u);
                        err = 0;
                }
                goto out;
        }
        counts = xcalloc(hosts.n ? hosts.n : 1, sizeof(*counts));
        rq.counts = counts;
        /* one choice at a time in this process: a sibling chosen a moment ago counts */
        pthread_mutex_lock(&c->p->lock);
        count_cluster_vms(c, &hosts, counts);
        maas_pod_choose(&hosts, &rq, &ch);
        if (ch.chosen >= 0)
                remember_placement(c, hosts.items[ch.chosen].id);
        pthread_mutex_unlock(&c->p->lock);
        if (ch.chosen < 0) {
                no_host(c, &hosts, &rq, &ch, res);
                goto out;
        }
        log_info(LOGGER, "composing a VM", "object=%s/%s host=%s hostname=%s", c->ns, c->name,
                 hosts.items[ch.chosen].name, hostname);
        err = compose_on(c, &hosts.items[ch.chosen], &ch, &rq, hostname, res);
out:
        free(counts);
        maas_pod_list_release(&hosts);
        maas_error_release(&me);
        return err;
}

/* --- the VM found by its hostname --------------------------------------------------------------
 */

/* Looks the VM up by hostname: 0 with *ret filled (and *ret_found), or an error. */
static int find_vm(struct maasmachine_ctx *c,
                   const char *hostname,
                   struct maas_node *ret,
                   bool *ret_found)
{
        struct maas_node_list l = { 0 };
        struct maas_error me = { 0 };
        int err;

        *ret_found = false;
        err = maas_list_machines(c->w->maas, &(struct maas_node_filter){ .hostname = hostname }, &l,
                                 &me);
        reconciler_maas_count(c->p, "list_machines", err, &me);
        maas_error_release(&me);
        for (size_t i = 0; err == 0 && i < l.n; i++) {
                if (!*ret_found && l.items[i].hostname &&
                    strcasecmp(l.items[i].hostname, hostname) == 0) {
                        *ret = l.items[i];
                        l.items[i] = (struct maas_node){ 0 };
                        *ret_found = true;
                }
        }
        maas_node_list_release(&l);
        return err;
}

static const char *owner_data(const struct maas_node *n, const char *key)
{
        const cJSON *v =
                n->owner_data ? cJSON_GetObjectItemCaseSensitive(n->owner_data, key) : NULL;

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool stamped_for_us(const struct maasmachine_ctx *c, const struct maas_node *n)
{
        const char *m = owner_data(n, "capmaas-machine"), *ns = owner_data(n, "capmaas-namespace");

        return m && ns && strcmp(m, c->name) == 0 && strcmp(ns, c->ns) == 0;
}

static bool commissioning(const char *st)
{
        static const char *const wait[] = { "New", "Commissioning", "Testing" };

        for (size_t i = 0; st && i < sizeof(wait) / sizeof(wait[0]); i++)
                if (strcmp(st, wait[i]) == 0)
                        return true;
        return false;
}

static bool failed_commissioning(const char *st)
{
        static const char *const bad[] = { "Broken", "Failed commissioning", "Failed testing" };

        for (size_t i = 0; st && i < sizeof(bad) / sizeof(bad[0]); i++)
                if (strcmp(st, bad[i]) == 0)
                        return true;
        return false;
}

static int delete_vm(struct maasmachine_ctx *c, const char *sid)
{
        struct maas_error me = { 0 };
        int err = maas_delete_machine(c->w->maas, sid, &me);

        reconciler_maas_count(c->p, "delete_machine", err, &me);
        if (err == CM_ENOTFOUND)
                err = 0;
        if (err)
                log_warn(LOGGER, "cannot delete the VM", "object=%s/%s system_id=%s error=%s",
                         c->ns, c->name, sid, me.message ? me.message : maas_strerror(err));
        maas_error_release(&me);
        return err;
}

/* The composed VM is Ready: allocate it by system id, stamped with our UID. */
static int allocate_vm(struct maasmachine_ctx *c,
                       struct maas_node *vm,
                       struct reconcile_result *res,
                       bool *ret_got)
{
        char *comment = xasprintf("capmaas %s/%s", c->ns, c->name);
        struct maas_allocate_opts o = {
                .system_id = vm->system_id,
                .agent_name = c->mm.meta.uid,
                .comment = comment,
        };
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        char started[32];
        bool go = true;
        int err;

        /* MAAS changes a layout only while the machine is Ready: before the allocation, as
         * for a server (maasmachine_storage.c); repeated harmlessly after a crash */
        err = maasmachine_storage_layout_on(c, vm->system_id, res, &go);
        if (err || !go)
                goto out;
        err = maas_allocate(c->w->maas, &o, &n, &me);
        reconciler_maas_count(c->p, "allocate", err, &me);
        if (err) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                                "unable to allocate the composed VM %s: %s", vm->system_id,
                                me.message ? me.message : maas_strerror(err));
                if (err == MAAS_ENOMATCH || err == CM_ECONFLICT) { /* taken meanwhile */
                        maasmachine_requeue(res, 10000);
                        err = 0;
                }
                goto out;
        }
        maasmachine_stamp_owner_data(c, n.system_id);
        maasmachine_set_ids(c, n.zone, n.system_id);
        (void)snprintf(started, sizeof(started), "%lld", (long long)c->now);
        maasmachine_set_annotation(c, RECONCILER_ANNOTATION_DEPLOY_STARTED, started);
        reconciler_event(c->p, c->cur, "Normal", "MachineAllocated",
                         "Allocated the composed VM %s (%s) in zone %s", n.system_id,
                         n.hostname ? n.hostname : "", n.zone ? n.zone : "");
        maasmachine_take_node(c, &n);
        *ret_got = true;
        err = maasmachine_flush(c, true); /* the providerID before anything else */
out:
        maas_node_release(&n);
        maas_error_release(&me);
        free(comment);
        return err;
}

static int existing_vm(struct maasmachine_ctx *c,
                       struct maas_node *vm,
                       struct reconcile_result *res,
                       bool *ret_got)
{
        const char *st = vm->status_name ? vm->status_name : "";

        if (!maasmachine_node_is_vm(vm)) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                                "MAAS machine %s (power type %s) holds this MaasMachine's VM "
                                "hostname %s and is no VM",
                                vm->system_id, vm->power_type, vm->hostname);
                maasmachine_requeue(res, 60000);
                return 0;
        }
        if (vm->owner && *vm->owner) {
                if (stamped_for_us(c, vm)) { /* allocated and stamped: the ids were lost */
                        log_info(LOGGER, "adopting the VM composed for this MaasMachine",
                                 "object=%s/%s system_id=%s", c->ns, c->name, vm->system_id);
                        maasmachine_set_ids(c, vm->zone, vm->system_id);
                        maasmachine_take_node(c, vm);
                        *ret_got = true;
                        return maasmachine_flush(c, true);
                }
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                                "MAAS machine %s (%s) holds this MaasMachine's VM hostname and "
                                "is allocated to %s",
                                vm->system_id, vm->hostname, vm->owner);
                maasmachine_requeue(res, 60000);
                return 0;
        }
        if (strcmp(st, "Ready") == 0)
                return allocate_vm(c, vm, res, ret_got);
        if (failed_commissioning(st)) {
                reconciler_event(c->p, c->cur, "Warning", "VMComposeFailed",
                                 "composed VM %s is %s; deleting it to compose another",
                                 vm->system_id, st);
                maasmachine_requeue(res, 5000);
                return delete_vm(c, vm->system_id);
        }
        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        REASON_COMPOSING, "VM %s (%s) is %s", vm->hostname, vm->system_id,
                        commissioning(st) ? "commissioning" : st);
        maasmachine_requeue(res, COMMISSION_POLL);
        return 0;
}

int maasmachine_compose(struct maasmachine_ctx *c, struct reconcile_result *res, bool *ret_got)
{
        char *hostname = vm_hostname_of(c);
        struct maas_node vm = { 0 };
        bool found = false;
        int err;

        *ret_got = false;
        err = find_vm(c, hostname, &vm, &found);
        if (err == 0 && found)
                err = existing_vm(c, &vm, res, ret_got);
        else if (err == 0)
                err = choose_and_compose(c, hostname, res);
        maas_node_release(&vm);
        free(hostname);
        return err;
}

/* --- delete and replace --------------------------------------------------------------------------
 */

int maasmachine_vm_delete(struct maasmachine_ctx *c, bool owned)
{
        char *hostname = vm_hostname_of(c);
        struct maas_node vm = { 0 };
        bool found = false;
        int err = 0;

        if (c->have_node && owned) {
                err = delete_vm(c, c->node.system_id);
                if (err == 0)
                        reconciler_event(c->p, c->cur, "Normal", "VMDeleted", "Deleted VM %s (%s)",
                                         c->node.hostname, c->node.system_id);
        }
        /* a VM composed but never allocated (or whose ids were lost) goes too */
        if (err == 0)
                err = find_vm(c, hostname, &vm, &found);
        if (err == 0 && found && maasmachine_node_is_vm(&vm) &&
            (!vm.owner || !*vm.owner || stamped_for_us(c, &vm))) {
                err = delete_vm(c, vm.system_id);
                if (err == 0)
                        reconciler_event(c->p, c->cur, "Normal", "VMDeleted", "Deleted VM %s (%s)",
                                         vm.hostname, vm.system_id);
        }
        if (err == 0)
                maasmachine_vm_forget(c);
        maas_node_release(&vm);
        free(hostname);
        return err;
}

int maasmachine_vm_replace(struct maasmachine_ctx *c, const char *why, struct reconcile_result *res)
{
        char *sid = xstrdup(c->node.system_id);
        int err;

        reconciler_deploy_failed(c->p, why);
        err = delete_vm(c, sid);
        if (err == 0) {
                reconciler_event(c->p, c->cur, "Warning", "MachineReplaced",
                                 "VM %s: %s; deleted it to compose another", sid,
                                 strcmp(why, RECONCILER_DEPLOY_TIMEOUT) == 0
                                         ? "deploy deadline passed"
                                         : "deployment failed");
                maasmachine_drop_node(c);
                maasmachine_set_ids(c, NULL, NULL);
                maasmachine_set_annotation(c, ANNOTATION_VM_HOST, NULL);
                maasmachine_requeue(res, 5000);
        }
        free(sid);
        return err;
}
