/*
 * provider: wires the informers, the controllers (MaasMachine, MaasCluster and, when
 * served, MaasRemediation), their watches and per-worker clients (see provider.h).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "err.h"
#include "fleet_snapshot.h"
#include "kube_events.h"
#include "log.h"
#include "maas_identity.h"
#include "maascluster.h"
#include "maasmachine.h"
#include "maasmachine_reuse.h"
#include "maasmachinetemplate.h"
#include "maasremediation.h"
#include "metrics.h"
#include "provider_internal.h"
#include "reconciler.h"
#include "worker.h"
#include "xalloc.h"

#define LOGGER               "provider"
#define SYNC_TIMEOUT_MS      60000
/* Discovery of the Cluster API version: retried with backoff for up to this long (then
 * provider_start fails, as when the informers never sync). */
#define DISCOVERY_TIMEOUT_MS 60000
#define DISCOVERY_BASE_MS    250
#define DISCOVERY_MAX_MS     8000

/* --- per-worker clients ------------------------------------------------------------------ */

static void *worker_new(void *arg, unsigned idx)
{
        struct reconciler_worker *w = NULL;
        int err;

        (void)idx;
        err = reconciler_worker_new(arg, NULL, &w);
        if (err) {
                log_error(LOGGER, "cannot create a worker's clients", "error=%s", cm_strerror(err));
                return NULL;
        }
        return w;
}

static void worker_free_cb(void *wctx)
{
        (void)reconciler_worker_free(wctx);
}

static int machine_reconcile(void *wctx,
                             const char *ns,
                             const char *name,
                             struct reconcile_result *res)
{
        return wctx ? maasmachine_reconcile(wctx, ns, name, res) : CM_EINVAL;
}

static int cluster_reconcile(void *wctx,
                             const char *ns,
                             const char *name,
                             struct reconcile_result *res)
{
        return wctx ? maascluster_reconcile(wctx, ns, name, res) : CM_EINVAL;
}

static int template_reconcile(void *wctx,
                              const char *ns,
                              const char *name,
                              struct reconcile_result *res)
{
        return wctx ? maasmachinetemplate_reconcile(wctx, ns, name, res) : CM_EINVAL;
}

static const struct controller_ops template_ops = {
        .worker_new = worker_new,
        .worker_free = worker_free_cb,
        .reconcile = template_reconcile,
};

static int remediation_reconcile(void *wctx,
                                 const char *ns,
                                 const char *name,
                                 struct reconcile_result *res)
{
        return wctx ? maasremediation_reconcile(wctx, ns, name, res) : CM_EINVAL;
}

static const struct controller_ops remediation_ops = {
        .worker_new = worker_new,
        .worker_free = worker_free_cb,
        .reconcile = remediation_reconcile,
};

static const struct controller_ops machine_ops = {
        .worker_new = worker_new,
        .worker_free = worker_free_cb,
        .reconcile = machine_reconcile,
};

static const struct controller_ops cluster_ops = {
        .worker_new = worker_new,
        .worker_free = worker_free_cb,
        .reconcile = cluster_reconcile,
};

/* --- watch mappings ------------------------------------------------------------------------ */

typedef void add_fn(void *ctl, const char *ns, const char *name);

/* An object's spec.infrastructureRef when it names our `kind`. */
static void map_infra_ref(const struct provider *p,
                          const struct kube_object *obj,
                          const char *kind,
                          add_fn *add,
                          void *ctl)
{
        const char *name = capi_ref_name(&p->capi, kube_object_json(obj), "infrastructureRef",
                                         SCHEMA_GROUP, kind);

        if (name)
                add(ctl, kube_object_namespace(obj), name);
}

static void map_machine_to_mm(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        map_infra_ref(arg, obj, SCHEMA_KIND_MACHINE, add, ctl);
}

static void map_cluster_to_mc(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        map_infra_ref(arg, obj, SCHEMA_KIND_CLUSTER, add, ctl);
}

/* Every MaasMachine of the cluster an object belongs to (by label or, for a Cluster, by
 * name). */
static void map_to_cluster_mms(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        struct provider *p = arg;
        const char *cluster = kube_object_cluster_name(obj);
        const char *kind = json_find_str(kube_object_json(obj), "kind", NULL);

        if (!cluster && kind && strcmp(kind, "Cluster") == 0)
                cluster = kube_object_name(obj);
        if (cluster) /* keys only: nothing parsed */
                (void)informer_each_key(p->maasmachines, kube_object_namespace(obj), cluster, add,
                                        ctl);
}

/* A control-plane MaasMachine → its cluster's MaasCluster. */
static void map_cp_mm_to_mc(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        struct provider *p = arg;
        struct kube_object *cluster;

        if (!capi_is_control_plane(kube_object_json(obj)))
                return;
        cluster = reconciler_cluster_of(p, kube_object_namespace(obj), kube_object_json(obj));
        if (cluster)
                map_infra_ref(p, cluster, SCHEMA_KIND_CLUSTER, add, ctl);
        kube_object_unref(cluster);
}

/* An IPAddressClaim → the MaasMachine that controls it (maasmachine_ipam.c creates them). */
static void map_claim_to_mm(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        const cJSON *ref;

        (void)arg;
        cJSON_ArrayForEach (ref,
                            json_find(kube_object_json(obj), "metadata", "ownerReferences", NULL)) {
                const char *k = json_find_str(ref, "kind", NULL);
                const char *av = json_find_str(ref, "apiVersion", NULL);
                const char *n = json_find_str(ref, "name", NULL);

                if (cJSON_IsTrue(json_find(ref, "controller", NULL)) && k && av && n &&
                    strcmp(k, SCHEMA_KIND_MACHINE) == 0 &&
                    strncmp(av, SCHEMA_GROUP "/", strlen(SCHEMA_GROUP "/")) == 0)
                        add(ctl, kube_object_namespace(obj), n);
        }
}

/* --- the inventory's refreshes ---------------------------------------------------------- */

static void enqueue_key(void *ctl, const char *ns, const char *name)
{
        controller_enqueue(ctl, ns, name);
}

/* The zones that hold machines, as one digest: a change is what MaasClusters must see. */
static uint64_t zones_digest(const struct maas_inventory_snapshot *snap)
{
        const char **zones = NULL;
        size_t n = maas_inv_zones_with_machines(snap, &zones);
        uint64_t h = reconciler_digest("", 0) ^ n;

        for (size_t i = 0; i < n; i++)
                h = h * 31 + reconciler_digest(zones[i], strlen(zones[i]) + 1);
        free(zones);
        return h | 1; /* 0 = not seen yet */
}

/* On the inventory's thread after each refresh: every template is computed again (a pass
 * that finds its status unchanged writes nothing), and every MaasCluster when the zones that
 * hold machines changed (its discovered failure domains). Keys only: nothing is parsed. */
static void on_inventory(void *ud, const struct maas_inventory_snapshot *snap)
{
        struct provider *p = ud;
        uint64_t d = zones_digest(snap);

        if (p->template_ctl)
                (void)informer_each_key(p->templates, NULL, NULL, enqueue_key, p->template_ctl);
        if (atomic_exchange(&p->zones_digest, d) != d)
                (void)informer_each_key(p->maasclusters, NULL, NULL, enqueue_key, p->cluster_ctl);
}

/* The pool found an identity's Secret changed during its backoff: the MaasClusters and
 * MaasMachines of every cluster naming it come back now instead of at their backoff's end. */
static void ident_changed(void *arg, const char *ns, const char *secret)
{
        struct provider *p = arg;
        char *key = xasprintf("%s/%s", ns, secret);
        char **clusters = NULL;
        size_t n = maas_ident_clusters_naming(p->idents, key, &clusters);

        for (size_t i = 0; i < n; i++) {
                const char *cluster = strchr(clusters[i], '/') + 1;

                if (p->cluster_ctl)
                        (void)informer_each_key(p->maasclusters, ns, cluster, enqueue_key,
                                                p->cluster_ctl);
                if (p->machine_ctl)
                        (void)informer_each_key(p->maasmachines, ns, cluster, enqueue_key,
                                                p->machine_ctl);
                free(clusters[i]);
        }
        free(clusters);
        free(key);
}

void reconciler_ident_inventory_refreshed(void *arg,
                                          const char *ns,
                                          const char *secret,
                                          const struct maas_inventory_snapshot *snap)
{
        struct provider *p = arg;
        char *key = xasprintf("%s/%s", ns, secret);
        char **clusters = NULL;
        size_t n = maas_ident_clusters_naming(p->idents, key, &clusters);
        bool zones = n && maas_ident_zones_changed(p->idents, key, zones_digest(snap));

        for (size_t i = 0; i < n; i++) {
                const char *cluster = strchr(clusters[i], '/') + 1;

                if (p->template_ctl)
                        (void)informer_each_key(p->templates, ns, cluster, enqueue_key,
                                                p->template_ctl);
                if (zones)
                        (void)informer_each_key(p->maasclusters, ns, cluster, enqueue_key,
                                                p->cluster_ctl);
                free(clusters[i]);
        }
        free(clusters);
        free(key);
}

/* A Machine → the MaasRemediation named after it (CAPI's external remediation), when one
 * is cached. */
static void map_machine_to_remediation(void *arg,
                                       const struct kube_object *obj,
                                       add_fn *add,
                                       void *ctl)
{
        struct provider *p = arg;
        struct kube_object *r = informer_get(p->maasremediations, kube_object_namespace(obj),
                                             kube_object_name(obj));

        if (r)
                add(ctl, kube_object_namespace(obj), kube_object_name(obj));
        kube_object_unref(r);
}

/* --- lifecycle ------------------------------------------------------------------------------ */

/* capmaas_remediations_*: every result at zero from the start, so the series exist before
 * the first remediation (the dashboards and alerts read them). */
static int register_remediation_metrics(struct provider *p)
{
        static const char *const result[] = { "result", NULL };
        static const char *const results[] = { "succeeded", "failed", "refused" };
        struct metric_family *f = NULL;
        int err;

        err = metrics_counter(p->metrics, "capmaas_remediations_total",
                              "MaasRemediations ended: succeeded (the Node was Ready again), "
                              "failed (handed back to Cluster API for replacement), refused (no "
                              "power call).",
                              result, &p->remediations);
        for (size_t i = 0; err == 0 && i < ARRAY_SIZE(results); i++)
                (void)metric_series(p->remediations, results[i]);
        if (err == 0)
                err = metrics_counter(p->metrics, "capmaas_remediation_power_cycles_total",
                                      "Power cycles (off, confirmed off, on) of MaasRemediations.",
                                      NULL, &f);
        if (err == 0)
                p->remediation_power_cycles = metric_series(f, NULL);
        if (err == 0)
                err = metrics_gauge(p->metrics, "capmaas_remediations_in_progress",
                                    "MaasRemediations power cycling or waiting for their Node.",
                                    NULL, &f);
        if (err == 0)
                p->remediations_in_progress = metric_series(f, NULL);
        return err;
}

static int register_metrics(struct provider *p)
{
        static const char *const op_code[] = { "op", "code", NULL };
        static const char *const phase[] = { "phase", NULL };
        static const char *const reason[] = { "reason", NULL };
        int err;

        if (!p->metrics)
                return 0;
        err = metrics_counter(p->metrics, "capmaas_maas_requests_total",
                              "MAAS API calls made by the controllers, by operation and result.",
                              op_code, &p->maas_requests);
        if (err == 0)
                err = metrics_register(
                        p->metrics,
                        &(struct metric_desc){ .type = METRIC_HISTOGRAM,
                                               .name = "capmaas_machine_phase_seconds",
                                               .help = "Time MaasMachines spent in each phase.",
                                               .labels = phase,
                                               .buckets = metrics_reconcile_buckets,
                                               .n_buckets = METRICS_RECONCILE_BUCKETS_N },
                        &p->phase_seconds);
        if (err == 0)
                err = metrics_counter(p->metrics, "capmaas_machine_replacements_total",
                                      "MAAS machines released and replaced after a failed or "
                                      "timed-out deploy.",
                                      reason, &p->replaced);
        if (err == 0)
                err = metrics_counter(p->metrics, "capmaas_maasmachine_host_lost_total",
                                      "Provisioned MaasMachines whose MAAS machine was lost "
                                      "(deleted, released, held by another owner, Broken), "
                                      "reported for Cluster API to replace.",
                                      reason, &p->hosts_lost);
        if (err == 0)
                err = metrics_counter(p->metrics, "capmaas_maas_deploy_failures_total",
                                      "MAAS deploys that did not complete, by reason: MAAS "
                                      "reported Failed deployment, the deploy passed "
                                      "--deploy-timeout, or MAAS refused the deploy calls.",
                                      reason, &p->deploy_failures);
        if (err == 0)
                err = reconciler_metrics_zero(p);
        if (err == 0)
                err = fleet_snapshot_phase_metrics(p);
        if (err == 0)
                err = register_remediation_metrics(p);
        if (err == 0)
                err = maasmachine_reuse_metrics(p);
        return err;
}

int provider_new(const struct provider_opts *o, struct provider **ret)
{
        struct provider *p;
        int err;

        if (!o || !o->kube || !o->maas)
                return CM_EINVAL;
        p = xcalloc(1, sizeof(*p));
        p->settings = o->settings;
        p->kube = o->kube;
        p->limiter = o->limiter;
        p->maas_budget = o->maas_budget;
        p->maas = o->maas;
        p->metrics = o->metrics;
        p->clock = o->clock;
        p->maas_ca_file = o->maas_ca_file;
        p->maas_insecure = o->maas_insecure_skip_verify;
        p->inventory = o->inventory;
        p->ident_inventories = o->ident_inventories;
        pthread_mutex_init(&p->lock, NULL);
        pthread_mutex_init(&p->fleet_lock, NULL);
        pthread_mutex_init(&p->fleet_index_lock, NULL);
        pthread_cond_init(&p->fleet_cond, NULL);
        err = maas_ident_pool_new(
                &(struct maas_ident_pool_opts){ .qps = o->settings.maas_api_qps,
                                                .burst = o->settings.maas_api_burst,
                                                .clock = o->clock,
                                                .timeout_ms = (uint32_t)o->settings.maas_timeout_ms,
                                                .metrics = o->metrics,
                                                .changed = ident_changed,
                                                .changed_arg = p },
                &p->idents);
        if (err == 0)
                err = register_metrics(p);
        if (err) {
                provider_free(p);
                return err;
        }
        *ret = p;
        return 0;
}

static int new_informer(struct provider *p, const struct kube_resource *r, struct informer **ret)
{
        char *selector = NULL;
        int err;

        if (p->settings.watch_filter && *p->settings.watch_filter)
                selector = xasprintf("%s=%s", SCHEMA_LABEL_WATCH_FILTER, p->settings.watch_filter);
        err = informer_new(&(struct informer_opts){ .resource = r,
                                                    .config = p->kube,
                                                    .limiter = p->limiter,
                                                    .namespace = p->settings.namespace,
                                                    .label_selector = selector,
                                                    .resync_ms = p->settings.sync_period_ms,
                                                    .clock = p->clock,
                                                    .metrics = p->metrics },
                           ret);
        free(selector);
        return err;
}

static int new_controller(struct provider *p,
                          const char *name,
                          unsigned workers,
                          const struct controller_ops *ops,
                          struct controller **ret)
{
        return controller_new(&(struct controller_opts){ .name = name,
                                                         .workers = workers ? workers : 1,
                                                         .ops = ops,
                                                         .arg = p,
                                                         .clock = p->clock,
                                                         .metrics = p->metrics },
                              ret);
}

static int first_page(void *arg, cJSON *page, bool first, bool restart)
{
        (void)arg;
        (void)first;
        (void)restart;
        cJSON_Delete(page);
        return 1; /* one page says enough */
}

/* Whether our RBAC lets us list the claims: the reference provider's (and an older
 * release's) does not, and an informer that is refused never syncs, which would keep every
 * controller from starting. Refused, IPAM is treated as unavailable (with a condition). */
static int may_list_claims(struct provider *p, struct kube_client *c)
{
        struct kube_error e = { 0 };
        int err = kube_list_pages(c, &p->ipam.claims, p->settings.namespace,
                                  &(struct kube_list_opts){ .page_size = 1 }, first_page, NULL, &e);

        if (err == CM_EFORBIDDEN) {
                log_warn(LOGGER,
                         "may not list ipaddressclaims: addressesFromPools is refused until "
                         "the RBAC of this release is applied",
                         "group=%s reason=%s", CAPI_IPAM_GROUP, e.message ? e.message : "");
                p->ipam_forbidden = true;
                p->ipam = (struct capi_ipam_api){ 0 }; /* unknown: no informer */
                err = 0;
        }
        kube_error_release(&e);
        return err == 1 ? 0 : err;
}

/* The IPAM contract's version. Not served (no Cluster API IPAM CRDs) is an answer: claims
 * are then refused with a condition (maasmachine_ipam.c); any other error is retried. */
static int discover_ipam(struct provider *p, struct kube_client *c)
{
        struct kube_error e = { 0 };
        int err = capi_ipam_discover(&p->ipam, c, &e);

        p->ipam_forbidden = false;
        if (err == 0)
                err = may_list_claims(p, c);
        if (err == 0 && capi_ipam_known(&p->ipam))
                log_info(LOGGER, "reading Cluster API IPAM objects", "version=%s/%s",
                         CAPI_IPAM_GROUP, p->ipam.version);
        else if (err == CM_ENOTFOUND || err == CM_EUNSUPPORTED)
                log_info(LOGGER, "Cluster API IPAM is not served: addressesFromPools is refused",
                         "group=%s error=%s", CAPI_IPAM_GROUP, cm_strerror(err));
        else if (err) /* 0 here: forbidden, which may_list_claims logged */
                log_warn(LOGGER, "cannot tell which Cluster API IPAM versions are served",
                         "group=%s error=%s reason=%s", CAPI_IPAM_GROUP, cm_strerror(err),
                         e.message ? e.message : "");
        kube_error_release(&e);
        return err == CM_ENOTFOUND || err == CM_EUNSUPPORTED ? 0 : err;
}

int provider_discover(struct provider *p, struct http_transport *t)
{
        struct kube_client *c = NULL;
        struct kube_error e = { 0 };
        int err;

        err = kube_client_new(&(struct kube_client_opts){ .config = p->kube,
                                                          .limiter = p->limiter,
                                                          .transport = t },
                              &c);
        if (err == 0)
                err = capi_api_discover(&p->capi, c, &e);
        if (err == 0)
                log_info(LOGGER, "reading Cluster API objects", "version=%s/%s", CAPI_GROUP,
                         p->capi.version);
        else
                log_warn(LOGGER, "cannot tell which Cluster API versions are served",
                         "group=%s error=%s reason=%s", CAPI_GROUP, cm_strerror(err),
                         e.message ? e.message : "");
        kube_error_release(&e);
        if (err == 0)
                err = discover_ipam(p, c);
        kube_client_free(c);
        return err;
}

/* provider_discover until it answers, with jittered backoff, never guessing a version. */
static int discover(struct provider *p)
{
        const struct backoff_policy policy = { DISCOVERY_BASE_MS, DISCOVERY_MAX_MS };
        uint64_t t0 = clock_now_ms(p->clock), rnd = t0 | 1;
        int err;

        for (unsigned failures = 0;; failures++) {
                err = provider_discover(p, NULL);
                if (err == 0 || err == CM_EUNSUPPORTED)
                        return err;
                if (clock_now_ms(p->clock) - t0 >= DISCOVERY_TIMEOUT_MS)
                        return err;
                rnd ^= rnd << 13;
                rnd ^= rnd >> 7;
                rnd ^= rnd << 17;
                if (!reconciler_sleep(p, backoff_jittered_ms(&policy, failures, rnd)))
                        return CM_ESHUTDOWN;
        }
}

/* The MaasCluster informer's handlers (its thread): which Secret each cluster names. */
static void ident_put(void *arg, const struct kube_object *obj)
{
        struct provider *p = arg;

        maas_ident_cluster_put(p->idents, obj);
}

static void ident_update(void *arg, const struct kube_object *old, const struct kube_object *cur)
{
        (void)old;
        ident_put(arg, cur);
}

static void ident_delete(void *arg, const struct kube_object *last)
{
        struct provider *p = arg;

        maas_ident_cluster_del(p->idents, last);
        (void)maas_ident_forget_unused(p->idents); /* no cluster names it: its clients go */
}

int provider_new_informers(struct provider *p)
{
        int err;

        if (!capi_api_known(&p->capi))
                return CM_EINVAL;
        err = new_informer(p, &KUBE_RES_MAASMACHINES, &p->maasmachines);
        if (err == 0)
                err = fleet_snapshot_index_watch(p);
        if (err == 0)
                err = new_informer(p, &KUBE_RES_MAASCLUSTERS, &p->maasclusters);
        if (err == 0)
                err = informer_add_handler(p->maasclusters,
                                           &(struct informer_handler){ .on_add = ident_put,
                                                                       .on_update = ident_update,
                                                                       .on_delete = ident_delete,
                                                                       .arg = p });
        if (err == 0)
                err = new_informer(p, &p->capi.machines, &p->machines);
        if (err == 0)
                err = new_informer(p, &p->capi.clusters, &p->clusters);
        if (err == 0 && capi_ipam_known(&p->ipam))
                err = new_informer(p, &p->ipam.claims, &p->ipclaims);
        if (err == 0 && p->inventory)
                err = new_informer(p, &KUBE_RES_MAASMACHINETEMPLATES, &p->templates);
        return err;
}

int provider_new_remediation_informer(struct provider *p)
{
        return new_informer(p, &KUBE_RES_MAASREMEDIATIONS, &p->maasremediations);
}

/* Whether MaasRemediations can be listed: an installation whose CRDs or RBAC predate them
 * answers 404 or 403, and an informer that is refused never syncs, which would keep every
 * controller from starting. Then remediation is off (logged). */
static int remediation_served(struct provider *p, bool *ret)
{
        struct kube_client *c = NULL;
        struct kube_error e = { 0 };
        int err = kube_client_new(
                &(struct kube_client_opts){ .config = p->kube, .limiter = p->limiter }, &c);

        if (err == 0)
                err = kube_list_pages(c, &KUBE_RES_MAASREMEDIATIONS, p->settings.namespace,
                                      &(struct kube_list_opts){ .page_size = 1 }, first_page, NULL,
                                      &e);
        *ret = err == 1;
        if (err == CM_ENOTFOUND || err == CM_EFORBIDDEN) {
                log_warn(LOGGER,
                         "MaasRemediation is not served or not permitted: remediation is off "
                         "until this release's CRDs and RBAC are applied",
                         "error=%s", cm_strerror(err));
                err = 1;
        }
        kube_error_release(&e);
        kube_client_free(c);
        return err == 1 ? 0 : err;
}

static int build_remediation(struct provider *p)
{
        bool served = false;
        int err = remediation_served(p, &served);

        if (err || !served)
                return err;
        err = provider_new_remediation_informer(p);
        if (err == 0)
                err = new_controller(p, "maasremediation", 1, &remediation_ops,
                                     &p->remediation_ctl);
        return err;
}

static int build(struct provider *p)
{
        int err;

        err = discover(p);
        if (err == 0)
                err = provider_new_informers(p);
        if (err == 0)
                err = event_recorder_new(&(struct event_recorder_opts){ .config = p->kube,
                                                                        .limiter = p->limiter,
                                                                        .component = "capmaas",
                                                                        .clock = p->clock,
                                                                        .metrics = p->metrics },
                                         &p->events);
        if (err == 0)
                err = new_controller(p, "maasmachine", p->settings.machine_concurrency,
                                     &machine_ops, &p->machine_ctl);
        if (err == 0)
                err = new_controller(p, "maascluster", p->settings.cluster_concurrency,
                                     &cluster_ops, &p->cluster_ctl);
        if (err == 0 && p->templates)
                err = new_controller(p, "maasmachinetemplate", 1, &template_ops, &p->template_ctl);
        if (err == 0)
                err = build_remediation(p);
        return err;
}

static int watch(struct provider *p)
{
        int err;

        err = controller_watch(p->machine_ctl, p->maasmachines, NULL, NULL);
        if (err == 0)
                err = controller_watch(p->machine_ctl, p->machines, map_machine_to_mm, p);
        if (err == 0)
                err = controller_watch(p->machine_ctl, p->maasclusters, map_to_cluster_mms, p);
        if (err == 0)
                err = controller_watch(p->machine_ctl, p->clusters, map_to_cluster_mms, p);
        if (err == 0)
                err = controller_watch(p->cluster_ctl, p->maasclusters, NULL, NULL);
        if (err == 0)
                err = controller_watch(p->cluster_ctl, p->clusters, map_cluster_to_mc, p);
        if (err == 0)
                err = controller_watch(p->cluster_ctl, p->maasmachines, map_cp_mm_to_mc, p);
        if (err == 0 && p->ipclaims)
                err = controller_watch(p->machine_ctl, p->ipclaims, map_claim_to_mm, p);
        if (err == 0 && p->template_ctl)
                err = controller_watch(p->template_ctl, p->templates, NULL, NULL);
        if (err == 0 && p->remediation_ctl)
                err = controller_watch(p->remediation_ctl, p->maasremediations, NULL, NULL);
        if (err == 0 && p->remediation_ctl)
                err = controller_watch(p->remediation_ctl, p->machines, map_machine_to_remediation,
                                       p);
        return err;
}

static int start_informers(struct provider *p)
{
        struct informer *all[] = { p->maasmachines,    p->maasclusters, p->machines,
                                   p->clusters,        p->ipclaims,     p->templates,
                                   p->maasremediations };
        int err = 0;

        for (size_t i = 0; i < ARRAY_SIZE(all) && err == 0; i++)
                if (all[i])
                        err = informer_start(all[i]);
        for (size_t i = 0; i < ARRAY_SIZE(all) && err == 0; i++)
                if (all[i])
                        err = informer_wait_synced(all[i], SYNC_TIMEOUT_MS);
        return err;
}

int provider_start(struct provider *p)
{
        int err;

        if (p->started)
                return 0;
        err = build(p);
        if (err == 0)
                err = watch(p);
        if (err == 0)
                err = start_informers(p);
        if (err == 0)
                err = controller_start(p->cluster_ctl);
        if (err == 0)
                err = controller_start(p->machine_ctl);
        if (err == 0 && p->template_ctl)
                err = controller_start(p->template_ctl);
        if (err == 0 && p->inventory)
                maas_inventory_set_listener(p->inventory, on_inventory, p);
        if (err == 0 && p->ident_inventories && p->ident_inventories->set_listener)
                p->ident_inventories->set_listener(p->ident_inventories->ud,
                                                   reconciler_ident_inventory_refreshed, p);
        if (err == 0 && p->remediation_ctl)
                err = controller_start(p->remediation_ctl);
        if (err) {
                log_error(LOGGER, "cannot start the controllers", "error=%s", cm_strerror(err));
                provider_stop(p);
                return err;
        }
        p->started = true;
        log_info(LOGGER, "controllers started",
                 "machine_workers=%u cluster_workers=%u template_capacity=%s",
                 p->settings.machine_concurrency, p->settings.cluster_concurrency,
                 p->template_ctl ? "on" : "off");
        return 0;
}

void provider_stop(struct provider *p)
{
        struct informer *all[] = { p ? p->maasmachines : NULL,    p ? p->maasclusters : NULL,
                                   p ? p->machines : NULL,        p ? p->clusters : NULL,
                                   p ? p->ipclaims : NULL,        p ? p->templates : NULL,
                                   p ? p->maasremediations : NULL };

        if (!p)
                return;
        atomic_store(&p->stopping, true);
        /* The inventory's listener and the informers first: they enqueue into the
         * controllers. */
        if (p->inventory)
                maas_inventory_set_listener(p->inventory, NULL, NULL);
        if (p->ident_inventories && p->ident_inventories->set_listener)
                p->ident_inventories->set_listener(p->ident_inventories->ud, NULL, NULL);
        atomic_store(&p->zones_digest, 0);
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                if (all[i])
                        informer_stop(all[i]);
        if (p->machine_ctl)
                controller_stop(p->machine_ctl);
        if (p->cluster_ctl)
                controller_stop(p->cluster_ctl);
        if (p->template_ctl)
                controller_stop(p->template_ctl);
        if (p->remediation_ctl)
                controller_stop(p->remediation_ctl);
        p->remediation_ctl = controller_free(p->remediation_ctl);
        p->machine_ctl = controller_free(p->machine_ctl);
        p->cluster_ctl = controller_free(p->cluster_ctl);
        p->template_ctl = controller_free(p->template_ctl);
        p->templates = informer_free(p->templates);
        p->maasmachines = informer_free(p->maasmachines);
        p->maasclusters = informer_free(p->maasclusters);
        p->machines = informer_free(p->machines);
        p->clusters = informer_free(p->clusters);
        p->ipclaims = informer_free(p->ipclaims);
        p->maasremediations = informer_free(p->maasremediations);
        p->events = event_recorder_free(p->events);
        p->started = false;
        atomic_store(&p->stopping, false);
}

struct provider *provider_free(struct provider *p)
{
        if (!p)
                return NULL;
        provider_stop(p);
        reconciler_table_release(&p->power_off_reads);
        reconciler_table_release(&p->reuse_swept);
        reconciler_table_release(&p->reuse_untagged);
        reconciler_table_release(&p->reuse_tags);
        reconciler_table_release(&p->node_done);
        reconciler_table_release(&p->api_probe);
        fleet_snapshot_release(&p->fleets.fleet);
        fleet_snapshot_release(&p->fleets.inflight);
        fleet_snapshot_release(&p->fleets.unplaced);
        fleet_snapshot_release(&p->fleets.deleting);
        fleet_snapshot_index_release(p);
        p->idents = maas_ident_pool_free(p->idents);
        reconciler_table_release(&p->allocate_tried);
        reconciler_table_release(&p->static_ip_retry);
        reconciler_table_release(&p->unplaced_none);
        reconciler_dns_forget_all(p);
        reconciler_table_release(&p->released);
        reconciler_table_release(&p->claimed);
        reconciler_table_release(&p->remediating);
        reconciler_table_release(&p->remediation_cycles);
        for (size_t i = 0; i < p->vm_hosts.n; i++)
                free(p->vm_hosts.items[i].ptr);
        reconciler_table_release(&p->vm_hosts);
        reconciler_table_release(&p->vm_retry);
        reconciler_table_release(&p->deploy_retry);
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->fleet_cond);
        pthread_mutex_destroy(&p->fleet_lock);
        pthread_mutex_destroy(&p->fleet_index_lock);
        free(p);
        return NULL;
}
