/*
 * capi-sim: the Cluster API core and kubeadm controllers as an infrastructure provider sees
 * them (design.md §5; what it does: capi.h).
 *
 *   capi-sim --kubeconfig F --workload-kubeconfig F [--capi-contract v1beta2|v1beta1]
 *            [--port N] [--machine-workers N] [--maas-sim URL] [-v N]
 *
 * --maas-sim URL (maas-sim's base, http://127.0.0.1:N): the Nodes' Ready follows the
 * kubelets maas-sim simulates (GET URL/_sim/kubelets), so a test can hang one and see a power
 * cycle bring it back.
 *
 * --capi-contract (default v1beta2) is the Cluster API release it plays: v1beta2 as CAPI
 * 1.11+ (it reads and writes cluster.x-k8s.io, controlplane. and bootstrap. kinds as
 * v1beta2, in v1beta2 shapes: status.initialization.*, references {apiGroup, kind, name},
 * nodeRef {name}); v1beta1 as CAPI 1.10 (v1beta1 only). kube-sim does not convert between
 * CRD versions, so the CRDs must serve that version alone: tests/sim/capi/crds.sh MODE
 * prints crds.yaml for a mode.
 *
 * Once every informer has synced it serves GET /healthz on http://127.0.0.1:N (0 = pick)
 * and prints "listening on http://127.0.0.1:N" as its first stdout line; logs go to stderr.
 * SIGTERM/SIGINT stop it cleanly (main waits in sigwait; every thread has them blocked).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base64.h"
#include "buf.h"
#include "capi.h"
#include "err.h"
#include "http_server.h"
#include "log.h"
#include "parse.h"
#include "router.h"
#include "schema.h"
#include "xalloc.h"

#define LOGGER          "capi-sim"
#define SYNC_TIMEOUT_MS 30000
#define KUBECONFIG_MAX  (1u << 20)

struct opts {
        const char *kubeconfig, *workload_kubeconfig, *contract, *maas_sim;
        unsigned port, machine_workers;
        int verbosity;
};

typedef void add_fn(void *ctl, const char *ns, const char *name);

/* --- workers --------------------------------------------------------------------------------- */

static void worker_free(void *wctx)
{
        struct capi_worker *w = wctx;

        if (!w)
                return;
        kube_client_free(w->kube);
        kube_client_free(w->wl);
        free(w);
}

static void *worker_new(void *arg, unsigned idx)
{
        struct capi *s = arg;
        struct capi_worker *w = xcalloc(1, sizeof(*w));
        int err;

        (void)idx;
        w->s = s;
        err = kube_client_new(&(struct kube_client_opts){ .config = s->mgmt,
                                                          .field_manager = "capi-sim",
                                                          .user_agent = "capi-sim" },
                              &w->kube);
        if (err == 0)
                err = kube_client_new(&(struct kube_client_opts){ .config = s->workload,
                                                                  .field_manager = "capi-sim",
                                                                  .user_agent = "capi-sim" },
                                      &w->wl);
        if (err) {
                log_error(LOGGER, "cannot create clients", "error=%s", cm_strerror(err));
                worker_free(w);
                return NULL;
        }
        return w;
}

static int cluster_rec(void *wctx, const char *ns, const char *name, struct reconcile_result *r)
{
        return wctx ? capi_cluster_reconcile(wctx, ns, name, r) : CM_EINVAL;
}

static int kcp_rec(void *wctx, const char *ns, const char *name, struct reconcile_result *r)
{
        return wctx ? capi_owner_reconcile(wctx, CAPI_OWNER_KCP, ns, name, r) : CM_EINVAL;
}

static int md_rec(void *wctx, const char *ns, const char *name, struct reconcile_result *r)
{
        return wctx ? capi_owner_reconcile(wctx, CAPI_OWNER_MD, ns, name, r) : CM_EINVAL;
}

static int machine_rec(void *wctx, const char *ns, const char *name, struct reconcile_result *r)
{
        return wctx ? capi_machine_reconcile(wctx, ns, name, r) : CM_EINVAL;
}

static int mhc_rec(void *wctx, const char *ns, const char *name, struct reconcile_result *r)
{
        return wctx ? capi_mhc_reconcile(wctx, ns, name, r) : CM_EINVAL;
}

static int ipclaim_rec(void *wctx, const char *ns, const char *name, struct reconcile_result *r)
{
        return wctx ? capi_ipclaim_reconcile(wctx, ns, name, r) : CM_EINVAL;
}

static int pool_rec(void *wctx, const char *ns, const char *name, struct reconcile_result *r)
{
        return wctx ? capi_pool_reconcile(wctx, ns, name, r) : CM_EINVAL;
}

static const struct controller_ops ops[] = {
        { worker_new, worker_free, cluster_rec }, { worker_new, worker_free, kcp_rec },
        { worker_new, worker_free, md_rec },      { worker_new, worker_free, machine_rec },
        { worker_new, worker_free, mhc_rec },     { worker_new, worker_free, ipclaim_rec },
        { worker_new, worker_free, pool_rec },
};

/* --- watch mappings ----------------------------------------------------------------------------
 */

/* An object → its Cluster. One the Cluster has not adopted yet (a MaasCluster or a
 * KubeadmControlPlane created after its Cluster was last reconciled, so the reconcile did
 * not find it) carries no cluster name: with arg (the Clusters' informer) every Cluster of
 * its namespace is enqueued, and the one whose reference names it adopts it. */
static void map_to_cluster(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        const char *c = capi_cluster_of(kube_object_json(obj));

        if (c)
                add(ctl, kube_object_namespace(obj), c);
        else if (arg)
                (void)informer_each_key(arg, kube_object_namespace(obj), NULL, add, ctl);
}

static void map_machine_to_kcp(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        const char *o = capi_owner_name(kube_object_json(obj), CAPI_RES_KCPS.kind);

        (void)arg;
        if (o)
                add(ctl, kube_object_namespace(obj), o);
}

/* A Machine → its MachineDeployment: the deployment-name label its MachineSet gave it. */
static void map_machine_to_md(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        const cJSON *m = kube_object_json(obj);
        const char *o =
                capi_owner_name(m, CAPI_RES_MSS.kind)
                        ? json_find_str(m, "metadata", "labels", CAPI_LABEL_DEPLOYMENT, NULL)
                        : capi_owner_name(m, CAPI_RES_MDS.kind);

        (void)arg;
        if (o)
                add(ctl, kube_object_namespace(obj), o);
}

/* A Cluster → the KCPs or MDs (arg: their informer) of its namespace, keys only: an object
 * applied before its Cluster carries no cluster-name label yet. */
static void map_cluster_to_owners(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        (void)informer_each_key(arg, kube_object_namespace(obj), NULL, add, ctl);
}

static void map_mm_to_machine(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        const char *m = capi_owner_name(kube_object_json(obj), "Machine");

        (void)arg;
        if (m)
                add(ctl, kube_object_namespace(obj), m);
}

static void map_node_to_machine(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        const cJSON *o = kube_object_json(obj);
        const char *m = json_find_str(o, "metadata", "annotations", CAPI_ANN_MACHINE, NULL);
        const char *ns = json_find_str(o, "metadata", "annotations", CAPI_ANN_CLUSTER_NS, NULL);

        (void)arg;
        if (m && ns)
                add(ctl, ns, m);
}

/* A Machine or Cluster (or a Node, through its cluster-namespace annotation) → every
 * MachineHealthCheck of its namespace (arg: their informer). */
static void map_to_mhcs(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        const char *ns = kube_object_namespace(obj);

        if (!ns || !*ns)
                ns = json_find_str(kube_object_json(obj), "metadata", "annotations",
                                   CAPI_ANN_CLUSTER_NS, NULL);
        if (ns)
                (void)informer_each_key(arg, ns, NULL, add, ctl);
}

/*
 * A Machine's or Node's change reaches the MachineHealthChecks of its namespace some seconds
 * later, at most once in that time (capi_mhc_coalesce_ms: 3 s, longer when passes are long):
 * each MHC pass parses every target from the cache (~20 us each), so at 10 000 machines one
 * pass per change, or even per second, would make the simulator, not the provider, the
 * bench's bottleneck. A health check's timeouts are minutes in practice; its own next check
 * (the earliest timeout) is still scheduled exactly.
 */

static void add_later(void *ctl, const char *ns, const char *name)
{
        controller_enqueue_after(ctl, ns, name, capi_mhc_coalesce_ms());
}

static void map_to_mhcs_later(void *arg, const struct kube_object *obj, add_fn *add, void *ctl)
{
        (void)add;
        map_to_mhcs(arg, obj, add_later, ctl);
}

/* --- assembly ------------------------------------------------------------------------------- */

static int new_informer(const struct kube_config *cfg,
                        const struct kube_resource *r,
                        struct informer **ret)
{
        return informer_new(
                &(struct informer_opts){ .resource = r, .config = cfg, .user_agent = "capi-sim" },
                ret);
}

static int build_informers(struct capi *s)
{
        struct {
                const struct kube_resource *r;
                struct informer **inf;
        } t[] = {
                { &CAPI_RES_CLUSTERS, &s->clusters },
                { &KUBE_RES_MAASCLUSTERS, &s->maasclusters },
                { &CAPI_RES_KCPS, &s->kcps },
                { &CAPI_RES_MDS, &s->mds },
                { &CAPI_RES_MSS, &s->mss },
                { &CAPI_RES_MACHINES, &s->machines },
                { &KUBE_RES_MAASMACHINES, &s->maasmachines },
                { &KUBE_RES_MAASMACHINETEMPLATES, &s->templates },
                { &CAPI_RES_MHCS, &s->mhcs },
                { &CAPI_RES_IPCLAIMS, &s->ipclaims },
                { &CAPI_RES_IPADDRESSES, &s->ipaddresses },
                { &CAPI_RES_POOLS, &s->pools },
                { &CAPI_RES_GLOBAL_POOLS, &s->gpools },
        };

        int err = 0;

        for (size_t i = 0; i < ARRAY_SIZE(t) && err == 0; i++)
                err = new_informer(s->mgmt, t[i].r, t[i].inf);
        if (err == 0)
                err = new_informer(s->workload, &KUBE_RES_NODES, &s->nodes);
        if (err == 0) {
                struct informer_handler h = capi_index_handler(s->index);

                err = informer_add_handler(s->machines, &h);
        }
        return err;
}

static int build_controllers(struct capi *s, unsigned machine_workers)
{
        struct controller **ctl[] = { &s->cluster_ctl,
                                      &s->owner_ctl[CAPI_OWNER_KCP],
                                      &s->owner_ctl[CAPI_OWNER_MD],
                                      &s->machine_ctl,
                                      &s->mhc_ctl,
                                      &s->ipclaim_ctl,
                                      &s->pool_ctl };
        /* one claim worker, as the in-cluster provider: no address is handed out twice */
        static const char *const names[] = {
                "cluster",        "kubeadmcontrolplane", "machinedeployment",
                "machine",        "machinehealthcheck",  "ipaddressclaim",
                "inclusterippool"
        };
        int err = 0;

        for (size_t i = 0; i < ARRAY_SIZE(ctl) && err == 0; i++)
                err = controller_new(
                        &(struct controller_opts){ .name = names[i],
                                                   .workers = i == 3 ? machine_workers : 1,
                                                   .ops = &ops[i],
                                                   .arg = s },
                        ctl[i]);
        return err;
}

static int watch_all(struct capi *s)
{
        struct {
                struct controller *c;
                struct informer *inf;
                controller_map_fn map;
                void *arg;
        } t[] = {
                { s->cluster_ctl, s->clusters, NULL, NULL },
                { s->cluster_ctl, s->maasclusters, map_to_cluster, s->clusters },
                { s->cluster_ctl, s->kcps, map_to_cluster, s->clusters },
                { s->cluster_ctl, s->mds, map_to_cluster, NULL },
                { s->cluster_ctl, s->machines, map_to_cluster, NULL },
                { s->owner_ctl[CAPI_OWNER_KCP], s->kcps, NULL, NULL },
                { s->owner_ctl[CAPI_OWNER_KCP], s->machines, map_machine_to_kcp, NULL },
                { s->owner_ctl[CAPI_OWNER_KCP], s->clusters, map_cluster_to_owners, s->kcps },
                { s->owner_ctl[CAPI_OWNER_MD], s->mds, NULL, NULL },
                { s->owner_ctl[CAPI_OWNER_MD], s->machines, map_machine_to_md, NULL },
                { s->owner_ctl[CAPI_OWNER_MD], s->clusters, map_cluster_to_owners, s->mds },
                { s->machine_ctl, s->machines, NULL, NULL },
                { s->machine_ctl, s->maasmachines, map_mm_to_machine, NULL },
                { s->machine_ctl, s->nodes, map_node_to_machine, NULL },
                { s->mhc_ctl, s->mhcs, NULL, NULL },
                { s->mhc_ctl, s->machines, map_to_mhcs_later, s->mhcs },
                { s->mhc_ctl, s->nodes, map_to_mhcs_later, s->mhcs },
                { s->mhc_ctl, s->clusters, map_to_mhcs, s->mhcs },
                { s->ipclaim_ctl, s->ipclaims, NULL, NULL },
                { s->ipclaim_ctl, s->ipaddresses, capi_map_address_to_claim, NULL },
                { s->ipclaim_ctl, s->pools, capi_map_pool_to_claims, s->ipclaims },
                { s->ipclaim_ctl, s->gpools, capi_map_pool_to_claims, s->ipclaims },
                { s->ipclaim_ctl, s->clusters, capi_map_cluster_to_claims, s->ipclaims },
                { s->pool_ctl, s->pools, NULL, NULL },
                { s->pool_ctl, s->gpools, NULL, NULL },
                { s->pool_ctl, s->ipaddresses, capi_map_address_to_pool, NULL },
        };

        int err = 0;

        for (size_t i = 0; i < ARRAY_SIZE(t) && err == 0; i++)
                err = controller_watch(t[i].c, t[i].inf, t[i].map, t[i].arg);
        return err;
}

static int start_all(struct capi *s)
{
        struct informer *inf[] = { s->clusters, s->maasclusters, s->kcps,      s->mds,   s->mss,
                                   s->machines, s->maasmachines, s->templates, s->nodes, s->mhcs,
                                   s->ipclaims, s->ipaddresses,  s->pools,     s->gpools };
        struct controller *ctl[] = { s->cluster_ctl, s->owner_ctl[0], s->owner_ctl[1],
                                     s->machine_ctl, s->mhc_ctl,      s->ipclaim_ctl,
                                     s->pool_ctl };
        int err = 0;

        for (size_t i = 0; i < ARRAY_SIZE(inf) && err == 0; i++)
                err = informer_start(inf[i]);
        for (size_t i = 0; i < ARRAY_SIZE(inf) && err == 0; i++)
                err = informer_wait_synced(inf[i], SYNC_TIMEOUT_MS);
        for (size_t i = 0; i < ARRAY_SIZE(ctl) && err == 0; i++)
                err = controller_start(ctl[i]);
        return err;
}

static void stop_all(struct capi *s)
{
        struct informer **inf[] = { &s->clusters,     &s->maasclusters, &s->kcps,
                                    &s->mds,          &s->mss,          &s->machines,
                                    &s->maasmachines, &s->templates,    &s->nodes,
                                    &s->mhcs,         &s->ipclaims,     &s->ipaddresses,
                                    &s->pools,        &s->gpools };
        struct controller **ctl[] = { &s->cluster_ctl, &s->owner_ctl[0], &s->owner_ctl[1],
                                      &s->machine_ctl, &s->mhc_ctl,      &s->ipclaim_ctl,
                                      &s->pool_ctl };

        capi_kubelets_stop(s); /* it enqueues into the Machine controller */
        for (size_t i = 0; i < ARRAY_SIZE(inf); i++)
                if (*inf[i])
                        informer_stop(*inf[i]);
        for (size_t i = 0; i < ARRAY_SIZE(ctl); i++)
                *ctl[i] = controller_free(*ctl[i]);
        for (size_t i = 0; i < ARRAY_SIZE(inf); i++)
                *inf[i] = informer_free(*inf[i]);
}

/* --- process -----------------------------------------------------------------------------------
 */

static void healthz(void *ud, const struct http_request *req, struct http_response *resp)
{
        (void)ud;
        (void)req;
        resp->status = 200;
        resp->body = xstrdup("ok");
        resp->body_len = 2;
}

static int serve(struct router **ret_router, struct http_server **ret_srv, unsigned port)
{
        struct router *r = NULL;
        char *msg = NULL;
        int err = router_new(&r);

        if (err == 0)
                err = router_add(
                        r, &(struct route){ .path = "/healthz", .method = "GET", .fn = healthz });
        if (err == 0) {
                router_freeze(r);
                err = http_server_start(&(struct http_server_opts){ .name = "health",
                                                                    .host = "127.0.0.1",
                                                                    .port = (uint16_t)port,
                                                                    .router = r },
                                        ret_srv, &msg);
        }
        if (err) {
                log_error(LOGGER, "cannot serve /healthz", "error=%s reason=%s", cm_strerror(err),
                          msg ? msg : "");
                router_free(r);
                free(msg);
                return err;
        }
        *ret_router = r;
        return 0;
}

static int read_b64(const char *path, char **ret)
{
        struct buf b;
        char chunk[4096];
        size_t n;
        FILE *f = fopen(path, "rb");
        int err = 0;

        if (!f)
                return CM_ENOTFOUND;
        buf_init(&b, KUBECONFIG_MAX);
        while (err == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                err = buf_append(&b, chunk, n);
        fclose(f);
        if (err == 0)
                *ret = base64_encode(b.data ? b.data : "", b.len);
        buf_release(&b);
        return err;
}

static int usage(void)
{
        fprintf(stderr, "usage: capi-sim --kubeconfig F --workload-kubeconfig F "
                        "[--capi-contract v1beta2|v1beta1] [--port N] [--machine-workers N] "
                        "[--maas-sim URL] [-v N]\n");
        return 2;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
        for (int i = 1; i < argc; i += 2) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                uint64_t u = 0;

                if (!v)
                        return CM_EINVAL;
                if (strcmp(a, "--kubeconfig") == 0)
                        o->kubeconfig = v;
                else if (strcmp(a, "--workload-kubeconfig") == 0)
                        o->workload_kubeconfig = v;
                else if (strcmp(a, "--capi-contract") == 0)
                        o->contract = v;
                else if (strcmp(a, "--maas-sim") == 0)
                        o->maas_sim = v;
                else if (parse_u64(v, 0, 65535, &u) != 0)
                        return CM_EINVAL;
                else if (strcmp(a, "--port") == 0)
                        o->port = (unsigned)u;
                else if (strcmp(a, "--machine-workers") == 0 && u > 0 && u <= 64)
                        o->machine_workers = (unsigned)u;
                else if (strcmp(a, "-v") == 0)
                        o->verbosity = (int)u;
                else
                        return CM_EINVAL;
        }
        if (!o->kubeconfig || !o->workload_kubeconfig)
                return CM_EINVAL;
        return capi_set_contract(o->contract);
}

static int run(struct capi *s, const struct opts *o)
{
        struct router *r = NULL;
        struct http_server *srv = NULL;
        sigset_t set;
        int err, sig = 0;

        err = build_informers(s);
        if (err == 0)
                err = build_controllers(s, o->machine_workers);
        if (err == 0)
                err = watch_all(s);
        if (err == 0)
                err = start_all(s);
        if (err == 0 && o->maas_sim)
                err = capi_kubelets_start(s, o->maas_sim);
        if (err == 0)
                err = serve(&r, &srv, o->port);
        if (err == 0) {
                printf("listening on http://127.0.0.1:%u\n", (unsigned)http_server_port(srv));
                fflush(stdout);
                log_info(LOGGER, "started", "port=%u contract=%s", (unsigned)http_server_port(srv),
                         capi_contract.version);
                sigemptyset(&set);
                sigaddset(&set, SIGTERM);
                sigaddset(&set, SIGINT);
                while (sigwait(&set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
                        ;
                log_info(LOGGER, "stopping", "signal=%d", sig);
        } else {
                log_error(LOGGER, "cannot start", "error=%s", cm_strerror(err));
        }
        srv = http_server_free(srv);
        stop_all(s);
        router_free(r);
        return err;
}

static int load(const char *path, struct kube_config *cfg)
{
        char *msg = NULL;
        int err = kube_config_from_kubeconfig(path, NULL, cfg, &msg);

        if (err)
                log_error(LOGGER, "cannot load kubeconfig", "path=%s error=%s reason=%s", path,
                          cm_strerror(err), msg ? msg : "");
        free(msg);
        return err;
}

int main(int argc, char **argv)
{
        struct opts o = { .machine_workers = 8, .contract = "v1beta2" };
        struct kube_config mgmt = { 0 }, wl = { 0 };
        struct capi s = { 0 };
        sigset_t set;
        int err;

        if (parse_args(argc, argv, &o) != 0)
                return usage();
        log_setup(LOG_FORMAT_TEXT, o.verbosity, 2);
        xalloc_install_cjson_hooks();
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        err = load(o.kubeconfig, &mgmt);
        if (err == 0)
                err = load(o.workload_kubeconfig, &wl);
        if (err == 0)
                err = read_b64(o.workload_kubeconfig, &s.kubeconfig_b64);
        if (err == 0) {
                s.mgmt = &mgmt;
                s.workload = &wl;
                s.index = capi_index_new();
                err = run(&s, &o);
        }
        s.index = capi_index_free(s.index);
        free(s.kubeconfig_b64);
        kube_config_release(&mgmt);
        kube_config_release(&wl);
        curl_global_cleanup();
        return err ? 1 : 0;
}
