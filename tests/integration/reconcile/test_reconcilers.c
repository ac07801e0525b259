/*
 * The MaasCluster and MaasMachine reconcilers against kube-sim (management and workload)
 * and maas-sim over real loopback TLS/HTTP. The test plays the CAPI core controllers: it
 * creates the Cluster, Machine, bootstrap Secret and kubeconfig Secret itself, and checks
 * what the provider writes into Kubernetes and MAAS (upstream-capmaas.md R1–R16, beyond.md
 * B2–B5).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "base64.h"
#include "buf.h"
#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "kubesim.h"
#include "log.h"
#include "maas_client.h"
#include "metrics.h"
#include "provider.h"
#include "simproc.h"
#include "testutil.h"
#include "xalloc.h"

#define MAAS_KEY "ck1:tk1:ts1"
#define WAIT_MS  20000

struct fx {
        struct kubesim mgmt, workload;
        struct simproc maas_sim;
        struct kube_client *kube, *wl;
        struct maas_config mcfg;
        struct http_transport *mt;
        struct maas_client *maas;
        struct provider *prov;
        struct metrics *metrics;
        char maas_root[256]; /* http://127.0.0.1:N */
        char ns[32];
};

static struct fx *G; /* the group fixture */

#define OR(a, b) ((a) ? (a) : (b))
static unsigned ns_seq;

/* --- small helpers ---------------------------------------------------------------------- */

static const cJSON *condition(const cJSON *o, const char *type)
{
        const cJSON *c;

        cJSON_ArrayForEach (c, json_at(o, "status.conditions")) {
                const char *t = json_at_str(c, "type");

                if (t && strcmp(t, type) == 0)
                        return c;
        }
        return NULL;
}

static bool cond_is(const cJSON *o, const char *type, const char *status, const char *reason)
{
        const cJSON *c = condition(o, type);

        return c && strcmp(OR(json_at_str(c, "status"), ""), status) == 0 &&
               (!reason || strcmp(OR(json_at_str(c, "reason"), ""), reason) == 0);
}

static void sleep_ms(unsigned ms)
{
        usleep(ms * 1000u);
}

static cJSON *get(const struct kube_resource *r, const char *name)
{
        cJSON *o = NULL;

        if (kube_get(G->kube, r, G->ns, name, &o, NULL) != 0)
                return NULL;
        return o;
}

typedef bool pred_fn(const cJSON *o, const void *arg);

/* Polls r/name until pred holds (or the object is gone when pred is NULL). */
static cJSON *wait_obj(const struct kube_resource *r,
                       const char *name,
                       pred_fn *pred,
                       const void *arg)
{
        for (unsigned t = 0; t < WAIT_MS; t += 50) {
                cJSON *o = get(r, name);

                if (!pred && !o)
                        return NULL;
                if (pred && o && pred(o, arg))
                        return o;
                cJSON_Delete(o);
                sleep_ms(50);
        }
        fail_msg("timed out waiting for %s %s/%s", r->kind, G->ns, name);
        return NULL;
}

static bool pred_ready(const cJSON *o, const void *arg)
{
        (void)arg;
        return cJSON_IsTrue(json_at(o, "status.ready"));
}

static bool pred_unpowered(const cJSON *o, const void *arg)
{
        (void)arg;
        return cJSON_IsFalse(json_at(o, "status.machinePowered"));
}

static bool pred_cond_reason(const cJSON *o, const void *arg)
{
        const char *const *tr = arg; /* { type, status, reason } */

        return cond_is(o, tr[0], tr[1], tr[2]);
}

static void create(const struct kube_resource *r, cJSON *obj)
{
        struct kube_error e = { 0 };
        int err = kube_create(G->kube, r, G->ns, obj, NULL, &e);

        if (err)
                fail_msg("create %s: %s %s", r->kind, cm_strerror(err), OR(e.message, ""));
        kube_error_release(&e);
        cJSON_Delete(obj);
}

static void patch_status(const struct kube_resource *r, const char *name, const char *patch)
{
        assert_int_equal(kube_patch(G->kube,
                                    &(struct kube_patch_opts){ .resource = r,
                                                               .ns = G->ns,
                                                               .name = name,
                                                               .subresource = "status",
                                                               .type = KUBE_PATCH_MERGE,
                                                               .body = patch },
                                    NULL, NULL),
                         0);
}

static void patch_main(const struct kube_resource *r, const char *name, const char *patch)
{
        assert_int_equal(kube_patch(G->kube,
                                    &(struct kube_patch_opts){ .resource = r,
                                                               .ns = G->ns,
                                                               .name = name,
                                                               .subresource = NULL,
                                                               .type = KUBE_PATCH_MERGE,
                                                               .body = patch },
                                    NULL, NULL),
                         0);
}

/* --- simulators ------------------------------------------------------------------------- */

static cJSON *maas_admin(const char *method, const char *path, const char *body)
{
        char url[512];
        struct test_http_result res = { 0 };
        cJSON *doc = NULL;

        snprintf(url, sizeof(url), "%s/_sim/%s", G->maas_root, path);
        if (test_http_do(&(struct test_http){ .method = method,
                                              .url = url,
                                              .body = body,
                                              .content_type = body ? "application/json" : NULL },
                         &res) == 0)
                doc = cJSON_Parse(res.body ? res.body : "");
        test_http_result_release(&res);
        return doc;
}

static void start_maas_sim(void)
{
        char inv[512];
        char *msg = NULL;
        char *end;

        snprintf(inv, sizeof(inv), "%s/tests/sim/maas/inventory-sample.yaml",
                 test_env("CAPMAAS_SOURCE_DIR"));
        assert_int_equal(
                simproc_start(&G->maas_sim, "maas-sim",
                              (const char *const[]){ "--port", "0", "--inventory", inv, "--api-key",
                                                     MAAS_KEY, "--deploy-seconds", "0.3",
                                                     "--release-seconds", "0.1", NULL }),
                0);
        snprintf(G->maas_root, sizeof(G->maas_root), "%s", G->maas_sim.url);
        end = strstr(G->maas_root, "/MAAS");
        if (end)
                *end = '\0';
        assert_int_equal(maas_config_parse(G->maas_sim.url, MAAS_KEY, &G->mcfg, &msg), 0);
        free(msg);
        assert_int_equal(http_transport_curl_new(&(struct http_transport_opts){ 0 }, &G->mt), 0);
        assert_int_equal(
                maas_client_new(&(struct maas_client_opts){ .cfg = &G->mcfg, .transport = G->mt },
                                &G->maas),
                0);
}

/* A Node in the workload API for every machine of the inventory (kubelet joining). */
static void create_workload_nodes(void)
{
        struct maas_node_list l = { 0 };

        assert_int_equal(maas_list_machines(G->maas, NULL, &l, NULL), 0);
        for (size_t i = 0; i < l.n; i++) {
                cJSON *n =
                        test_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
                                  "\"%s\"}}",
                                  l.items[i].hostname);

                /* fresh per test: no providerID left over from an earlier one */
                (void)!kube_delete(G->wl, &KUBE_RES_NODES, NULL, l.items[i].hostname, NULL, NULL);
                assert_int_equal(kube_create(G->wl, &KUBE_RES_NODES, NULL, n, NULL, NULL), 0);
                cJSON_Delete(n);
        }
        maas_node_list_release(&l);
}

/* As capmaas --deploy-timeout 30s --sync-period 10m --machine-concurrency 4 --namespace NS,
 * the rest at their defaults. */
static struct provider_settings test_settings(void)
{
        return (struct provider_settings){
                .namespace = G->ns,
                .sync_period_ms = 600000,
                .machine_concurrency = 4,
                .cluster_concurrency = 2,
                .deploy_timeout_ms = 30000,
                .machine_refresh_ms = 60000,
                .maas_timeout_ms = 30000,
        };
}

static void start_provider(void)
{
        assert_int_equal(metrics_new(&G->metrics), 0);
        assert_int_equal(provider_new(&(struct provider_opts){ .settings = test_settings(),
                                                               .kube = &G->mgmt.cfg,
                                                               .maas = &G->mcfg,
                                                               .metrics = G->metrics },
                                      &G->prov),
                         0);
        assert_int_equal(provider_start(G->prov), 0);
}

/* The provider's metrics as Prometheus text (malloc'd). */
static char *render_metrics(void)
{
        struct buf b;
        char *out;

        buf_init(&b, 1 << 20);
        assert_int_equal(metrics_render(G->metrics, &b), 0);
        out = buf_take(&b, NULL);
        buf_release(&b);
        return out;
}

static void stop_provider(void)
{
        G->prov = provider_free(G->prov);
        G->metrics = metrics_free(G->metrics);
}

static int group_setup(void **state)
{
        G = xcalloc(1, sizeof(*G));
        log_setup(LOG_FORMAT_TEXT, 0, 2);
        assert_int_equal(kubesim_start(&G->mgmt, NULL), 0);
        assert_int_equal(kubesim_start(&G->workload, NULL), 0);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &G->mgmt.cfg }, &G->kube), 0);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &G->workload.cfg }, &G->wl),
                0);
        kubesim_install_crds(G->kube);
        sleep_ms(200); /* CRD establishment */
        *state = G;
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        kube_client_free(G->kube);
        kube_client_free(G->wl);
        kubesim_stop(&G->mgmt);
        kubesim_stop(&G->workload);
        free(G);
        return 0;
}

/* Each test: a fresh MAAS, a fresh namespace, a fresh provider. */
static int setup(void **state)
{
        cJSON *ns;

        (void)state;
        start_maas_sim();
        create_workload_nodes();
        snprintf(G->ns, sizeof(G->ns), "t%u", ++ns_seq);
        ns = test_json(
                "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}",
                G->ns);
        assert_int_equal(kube_create(G->kube, &KUBE_RES_NAMESPACES, NULL, ns, NULL, NULL), 0);
        cJSON_Delete(ns);
        start_provider();
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        stop_provider();
        maas_client_free(G->maas);
        http_transport_free(G->mt);
        maas_config_release(&G->mcfg);
        simproc_stop(&G->maas_sim);
        return 0;
}

/* --- the CAPI side, played by the test ------------------------------------------------------ */

static const char *UID_OF(const struct kube_resource *r, const char *name, char out[64])
{
        cJSON *o = get(r, name);

        assert_non_null(o);
        snprintf(out, 64, "%s", json_at_str(o, "metadata.uid"));
        cJSON_Delete(o);
        return out;
}

static void make_cluster(const char *name, bool infra_ready)
{
        char uid[64];

        create(&KUBE_RES_CLUSTERS,
               test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\","
                         "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"clusterNetwork\":"
                         "{\"apiServerPort\":6443},\"infrastructureRef\":{\"apiVersion\":"
                         "\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"MaasCluster\","
                         "\"name\":\"%s\"}}}",
                         name, name));
        create(&KUBE_RES_MAASCLUSTERS,
               test_json(
                       "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                       "\"MaasCluster\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"cluster.x-k8s."
                       "io/cluster-name\":\"%s\"},\"ownerReferences\":[{\"apiVersion\":\"cluster."
                       "x-k8s.io/v1beta1\",\"kind\":\"Cluster\",\"name\":\"%s\",\"uid\":\"%s\"}]},"
                       "\"spec\":{\"dnsDomain\":\"maas\",\"failureDomains\":[\"az1\",\"az2\"]}}",
                       name, name, name, UID_OF(&KUBE_RES_CLUSTERS, name, uid)));
        if (infra_ready)
                patch_status(&KUBE_RES_CLUSTERS, name,
                             "{\"status\":{\"infrastructureReady\":true,\"initialization\":"
                             "{\"infrastructureProvisioned\":true}}}");
}

static void make_kubeconfig_secret(const char *cluster)
{
        char *text = xmalloc(1 << 16), *b64;
        FILE *f = fopen(G->workload.kubeconfig, "rb");
        size_t n;

        assert_non_null(f);
        n = fread(text, 1, (1 << 16) - 1, f);
        fclose(f);
        b64 = base64_encode(text, n);
        create(&KUBE_RES_SECRETS,
               test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                         "\"%s-kubeconfig\"},\"data\":{\"value\":\"%s\"}}",
                         cluster, b64));
        free(b64);
        free(text);
}

struct machine_spec {
        const char *extra_spec; /* JSON members for the MaasMachine spec, or NULL */
        bool control_plane;
        bool bootstrap;
};

static void make_machine(const char *cluster, const char *name, const struct machine_spec *s)
{
        char uid[64], *b64 = base64_encode("#cloud-config\nruncmd: [echo hi]\n", 32);
        const char *cp = s->control_plane ? ",\"cluster.x-k8s.io/control-plane\":\"\"" : "";

        create(&KUBE_RES_SECRETS,
               test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                         "\"%s-bootstrap\"},\"data\":{\"value\":\"%s\"}}",
                         name, b64));
        create(&KUBE_RES_MACHINES,
               test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Machine\","
                         "\"metadata\":{\"name\":\"%s\",\"labels\":{\"cluster.x-k8s.io/"
                         "cluster-name\":"
                         "\"%s\"%s}},\"spec\":{\"clusterName\":\"%s\",\"bootstrap\":{%s%s%s},"
                         "\"infrastructureRef\":{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/"
                         "v1beta1\",\"kind\":\"MaasMachine\",\"name\":\"%s\"}}}",
                         name, cluster, cp, cluster, s->bootstrap ? "\"dataSecretName\":\"" : "",
                         s->bootstrap ? name : "", s->bootstrap ? "-bootstrap\"" : "", name));
        create(&KUBE_RES_MAASMACHINES,
               test_json(
                       "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                       "\"MaasMachine\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"cluster.x-k8s."
                       "io/cluster-name\":\"%s\"%s},\"ownerReferences\":[{\"apiVersion\":\"cluster."
                       "x-k8s.io/v1beta1\",\"kind\":\"Machine\",\"name\":\"%s\",\"uid\":\"%s\"}]},"
                       "\"spec\":{\"image\":\"ubuntu/jammy\",\"minCPU\":1,\"minMemory\":1024%s%s}}",
                       name, cluster, cp, name, UID_OF(&KUBE_RES_MACHINES, name, uid),
                       s->extra_spec ? "," : "", s->extra_spec ? s->extra_spec : ""));
        free(b64);
}

static void delete_obj(const struct kube_resource *r, const char *name)
{
        assert_int_equal(kube_delete(G->kube, r, G->ns, name, NULL, NULL), 0);
}

/* MAAS's view of one machine. */
static cJSON *maas_machine(const char *sid)
{
        cJSON *st = maas_admin("GET", "state", NULL);
        cJSON *m, *out = NULL;

        cJSON_ArrayForEach (m, json_at(st, "machines")) {
                if (strcmp(OR(json_at_str(m, "system_id"), ""), sid) == 0) {
                        out = cJSON_Duplicate(m, true);
                        break;
                }
        }
        cJSON_Delete(st);
        return out;
}

/* Number of MAAS machines not Ready (allocated, deploying, deployed, ...). */
static int maas_in_use(void)
{
        cJSON *st = maas_admin("GET", "state", NULL);
        const cJSON *m;
        int n = 0;

        cJSON_ArrayForEach (m, json_at(st, "machines")) {
                const char *s = json_at_str(m, "status_name");

                n += s && strcmp(s, "Ready") != 0;
        }
        cJSON_Delete(st);
        return n;
}

static int maas_count_requests(const char *needle)
{
        cJSON *log = maas_admin("GET", "requests", NULL);
        char *text = log ? cJSON_PrintUnformatted(log) : NULL;
        int n = 0;

        for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p++)
                n++;
        free(text);
        cJSON_Delete(log);
        return n;
}

/* Events in the test namespace with this reason. */
static int events_with(const char *reason)
{
        cJSON *l = NULL;
        const cJSON *e;
        int n = 0;

        if (kube_list(G->kube, &KUBE_RES_EVENTS, G->ns, NULL, &l, NULL) != 0)
                return 0;
        cJSON_ArrayForEach (e, json_at(l, "items")) {
                const char *r = json_at_str(e, "reason");

                n += r && strcmp(r, reason) == 0;
        }
        cJSON_Delete(l);
        return n;
}

static void wait_event(const char *reason)
{
        for (unsigned t = 0; t < WAIT_MS; t += 100) {
                if (events_with(reason) > 0)
                        return;
                sleep_ms(100);
        }
        fail_msg("no %s event", reason);
}

static bool record_has(const char *fqdn, const char *ip)
{
        cJSON *st = maas_admin("GET", "state", NULL);
        const cJSON *d, *i;
        bool found = false;

        cJSON_ArrayForEach (d, json_at(st, "dnsresources")) {
                if (strcmp(OR(json_at_str(d, "fqdn"), ""), fqdn) != 0)
                        continue;
                found = !ip;
                cJSON_ArrayForEach (i, json_at(d, "ips"))
                        found = found ||
                                (cJSON_IsString(i) && strcmp(i->valuestring, OR(ip, "")) == 0);
        }
        cJSON_Delete(st);
        return found;
}

static int n_records(void)
{
        cJSON *st = maas_admin("GET", "state", NULL);
        int n = cJSON_GetArraySize(json_at(st, "dnsresources"));

        cJSON_Delete(st);
        return n;
}

static char *ready_cluster(const char *name)
{
        const char *api_up[] = { "APIServerAvailable", "True", "APIServerAvailable" };
        cJSON *mc;
        char *host;

        make_cluster(name, true);
        make_kubeconfig_secret(name);
        mc = wait_obj(&KUBE_RES_MAASCLUSTERS, name, pred_cond_reason, api_up);
        host = xstrdup(json_at_str(mc, "spec.controlPlaneEndpoint.host"));
        assert_true(cond_is(mc, "Ready", "True", NULL));
        cJSON_Delete(mc);
        return host;
}

static char *ready_machine(const char *cluster, const char *name, const struct machine_spec *s)
{
        cJSON *mm;
        char *sid;

        make_machine(cluster, name, s);
        mm = wait_obj(&KUBE_RES_MAASMACHINES, name, pred_ready, NULL);
        sid = xstrdup(json_at_str(mm, "spec.systemID"));
        cJSON_Delete(mm);
        return sid;
}

/* --- MaasCluster -------------------------------------------------------------------------- */

/* R1, R2: finalizer, DNS record with TTL 10 named <cluster>-<6 hex>.<domain>, endpoint,
 * ready and provisioned; an unowned MaasCluster is left alone. */
static void test_cluster__endpoint_record_and_ready(void **state)
{
        cJSON *mc, *lone;
        const char *host;
        char want[64];

        (void)state;
        create(&KUBE_RES_MAASCLUSTERS,
               test_json(
                       "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                       "\"MaasCluster\",\"metadata\":{\"name\":\"lonely\"},\"spec\":{\"dnsDomain\":"
                       "\"maas\"}}"));
        make_cluster("c1", true);
        mc = wait_obj(&KUBE_RES_MAASCLUSTERS, "c1", pred_ready, NULL);
        host = json_at_str(mc, "spec.controlPlaneEndpoint.host");
        assert_non_null(host);
        assert_int_equal(strlen(host), strlen("c1-abcdef.maas"));
        snprintf(want, sizeof(want), "%.3s", host);
        assert_string_equal(want, "c1-");
        assert_string_equal(host + 9, ".maas");
        assert_true(cJSON_IsTrue(json_at(mc, "status.initialization.provisioned")));
        assert_int_equal((int)json_at(mc, "spec.controlPlaneEndpoint.port")->valuedouble, 6443);
        assert_true(cond_is(mc, "LoadBalancerReady", "True", "LoadBalancerReady"));
        assert_string_equal(json_at_str(mc, "status.network.dnsName"), host);
        assert_string_equal(cJSON_GetArrayItem(json_at(mc, "metadata.finalizers"), 0)->valuestring,
                            "maascluster.infrastructure.cluster.x-k8s.io");
        assert_string_equal(
                json_at_str(cJSON_GetArrayItem(json_at(mc, "status.failureDomains"), 1), "name"),
                "az2");
        assert_true(record_has(host, NULL));
        assert_int_equal(n_records(), 1);
        /* no <cluster>-kubeconfig Secret yet: the API server cannot be reached */
        assert_true(cond_is(mc, "APIServerAvailable", "False", "APIServerNotReady"));
        assert_true(cond_is(mc, "Ready", "False", NULL));
        lone = get(&KUBE_RES_MAASCLUSTERS, "lonely");
        assert_null(json_at(lone, "metadata.finalizers"));
        assert_null(json_at(lone, "status"));
        cJSON_Delete(lone);
        cJSON_Delete(mc);
}

/* R3, R4, R5, B1: the record follows the control planes; a deleting control plane waits
 * for its IP to leave the record before release; the cluster waits for its machines, then
 * deletes the record. MAAS ends as it was found. */
static void test_cluster__record_follows_control_planes_and_is_deleted(void **state)
{
        char *host = ready_cluster("c2");
        char *sid = ready_machine(
                "c2", "cp0", &(struct machine_spec){ .control_plane = true, .bootstrap = true });
        cJSON *node = maas_machine(sid), *mm;
        const char *ip = json_at_str(cJSON_GetArrayItem(json_at(node, "ips"), 0), "");
        const char *tr[] = { "DNSAttached", "True", "DNSAttached" };

        (void)state;
        (void)ip;
        mm = wait_obj(&KUBE_RES_MAASMACHINES, "cp0", pred_cond_reason, tr);
        assert_true(cJSON_IsTrue(json_at(mm, "status.dnsAttached")));
        assert_true(
                record_has(host, json_at_str(cJSON_GetArrayItem(json_at(mm, "status.addresses"), 1),
                                             "address")));
        cJSON_Delete(mm);
        delete_obj(&KUBE_RES_MAASCLUSTERS, "c2");
        sleep_ms(300);
        mm = get(&KUBE_RES_MAASCLUSTERS, "c2");
        assert_non_null(mm); /* held by its finalizer while cp0 exists */
        cJSON_Delete(mm);
        delete_obj(&KUBE_RES_MAASMACHINES, "cp0");
        wait_obj(&KUBE_RES_MAASMACHINES, "cp0", NULL, NULL);
        wait_obj(&KUBE_RES_MAASCLUSTERS, "c2", NULL, NULL);
        assert_int_equal(n_records(), 0);
        assert_true(events_with("SuccessfulRelease") >= 1);
        for (unsigned t = 0; t < 5000 && maas_in_use() > 0; t += 50)
                sleep_ms(50);
        assert_int_equal(maas_in_use(), 0);
        cJSON_Delete(node);
        free(sid);
        free(host);
}

/* --- MaasMachine --------------------------------------------------------------------------- */

/* R6, R7: no MAAS call before the cluster infrastructure and the bootstrap data exist. */
static void test_machine__waits_for_infrastructure_and_bootstrap_data(void **state)
{
        const char *infra[] = { "MachineDeployed", "False", "WaitingForClusterInfrastructure" };
        const char *boot[] = { "MachineDeployed", "False", "WaitingForBootstrapData" };
        cJSON *mm;

        (void)state;
        make_cluster("c3", false);
        make_kubeconfig_secret("c3");
        make_machine("c3", "w0", &(struct machine_spec){ .bootstrap = false });
        cJSON_Delete(wait_obj(&KUBE_RES_MAASMACHINES, "w0", pred_cond_reason, infra));
        patch_status(&KUBE_RES_CLUSTERS, "c3",
                     "{\"status\":{\"infrastructureReady\":true,\"initialization\":"
                     "{\"infrastructureProvisioned\":true}}}");
        cJSON_Delete(wait_obj(&KUBE_RES_MAASMACHINES, "w0", pred_cond_reason, boot));
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 0);
        patch_main(&KUBE_RES_MACHINES, "w0",
                   "{\"spec\":{\"bootstrap\":{\"dataSecretName\":\"w0-bootstrap\"}}}");
        mm = wait_obj(&KUBE_RES_MAASMACHINES, "w0", pred_ready, NULL);
        assert_true(cond_is(mm, "MachineDeployed", "True", "MachineDeployed"));
        cJSON_Delete(mm);
}

/* The workload Node named hostname, once capmaas has set its providerID. */
static cJSON *wait_node_provider_id(const char *hostname)
{
        cJSON *wnode = NULL;

        for (unsigned t = 0; t < WAIT_MS; t += 50) {
                cJSON_Delete(wnode);
                wnode = NULL;
                assert_int_equal(kube_get(G->wl, &KUBE_RES_NODES, NULL, hostname, &wnode, NULL), 0);
                if (json_at_str(wnode, "spec.providerID"))
                        return wnode;
                sleep_ms(50);
        }
        fail_msg("Node %s never got a providerID", hostname);
        return NULL;
}

static const char *node_zone_label(const cJSON *wnode)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(json_at(wnode, "metadata.labels"),
                                                          "topology.kubernetes.io/zone");

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* R8, R11 (Deployed), R13, B2: allocate with every constraint and our stamp, providerID
 * persisted, swap off, deploy with the bootstrap data; ready; the Node gets the providerID. */
static void test_machine__deploys_with_constraints_and_sets_node_provider_id(void **state)
{
        char *sid, pid[128], uid[64], *text;
        cJSON *mm, *node, *wnode;

        (void)state;
        free(ready_cluster("c4"));
        sid = ready_machine(
                "c4", "w1",
                &(struct machine_spec){ .bootstrap = true,
                                        .extra_spec = "\"resourcePool\":\"capi\","
                                                      "\"tags\":[\"ssd\",\"control-plane\"]" });
        mm = get(&KUBE_RES_MAASMACHINES, "w1");
        node = maas_machine(sid);
        /* every tag counts: the only capi machine with ssd AND control-plane */
        assert_string_equal(sid, "gfkk07");
        snprintf(pid, sizeof(pid), "maas:///%s/%s", json_at_str(node, "zone"), sid);
        assert_string_equal(json_at_str(mm, "spec.providerID"), pid);
        assert_string_equal(json_at_str(node, "status_name"), "Deployed");
        assert_string_equal(json_at_str(node, "pool"), "capi");
        assert_string_equal(json_at_str(node, "agent_name"),
                            UID_OF(&KUBE_RES_MAASMACHINES, "w1", uid));
        assert_string_equal(json_at_str(node, "owner_data.capmaas-machine"), "w1");
        assert_string_equal(json_at_str(node, "osystem"), "ubuntu");
        assert_string_equal(json_at_str(node, "distro_series"), "jammy");
        assert_non_null(json_at_str(node, "user_data"));
        assert_string_equal(json_at_str(mm, "status.machineState"), "Deployed");
        assert_true(cJSON_IsTrue(json_at(mm, "status.initialization.provisioned")));
        wnode = wait_node_provider_id(json_at_str(node, "hostname"));
        assert_string_equal(json_at_str(wnode, "spec.providerID"), pid);
        /* the MAAS zone as the topology zone: spread constraints work without a cloud
         * controller */
        assert_non_null(node_zone_label(wnode));
        assert_string_equal(node_zone_label(wnode), json_at_str(node, "zone"));
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 1);
        text = render_metrics();
        assert_non_null(
                strstr(text, "capmaas_maas_requests_total{op=\"allocate\",code=\"200\"} 1"));
        assert_non_null(strstr(text, "capmaas_maas_requests_total{op=\"deploy\",code=\"200\"} 1"));
        assert_non_null(strstr(text, "capmaas_machine_phase_seconds_count{phase=\"deploying\"} 1"));
        assert_non_null(
                strstr(text, "controller_runtime_reconcile_total{controller=\"maasmachine\""));
        free(text);
        cJSON_Delete(wnode);
        cJSON_Delete(node);
        cJSON_Delete(mm);
        free(sid);
}

/* A zone label the Node already carries (the kubelet's --node-labels, a cloud controller,
 * the user) stands; the providerID is set all the same. */
static void test_machine__node_keeps_its_own_zone_label(void **state)
{
        struct maas_node_list l = { 0 };
        char *sid, pid[128];
        cJSON *node, *wnode;

        (void)state;
        assert_int_equal(maas_list_machines(G->maas, NULL, &l, NULL), 0);
        for (size_t i = 0; i < l.n; i++)
                assert_int_equal(
                        kube_patch(
                                G->wl,
                                &(struct kube_patch_opts){
                                        .resource = &KUBE_RES_NODES,
                                        .ns = NULL,
                                        .name = l.items[i].hostname,
                                        .subresource = NULL,
                                        .type = KUBE_PATCH_MERGE,
                                        .body = "{\"metadata\":{\"labels\":{"
                                                "\"topology.kubernetes.io/zone\":\"rack-7\"}}}" },
                                NULL, NULL),
                        0);
        maas_node_list_release(&l);
        free(ready_cluster("c12"));
        sid = ready_machine("c12", "w1", &(struct machine_spec){ .bootstrap = true });
        node = maas_machine(sid);
        snprintf(pid, sizeof(pid), "maas:///%s/%s", json_at_str(node, "zone"), sid);
        wnode = wait_node_provider_id(json_at_str(node, "hostname"));
        assert_string_equal(json_at_str(wnode, "spec.providerID"), pid);
        assert_string_equal(node_zone_label(wnode), "rack-7");
        cJSON_Delete(wnode);
        cJSON_Delete(node);
        free(sid);
}

/* B2: the providerID write is lost after allocate (kube-sim rejects it) → the next pass
 * adopts the stamped machine instead of allocating a second one. */
static void test_machine__adopts_stamped_machine_after_lost_write(void **state)
{
        const char *boot[] = { "MachineDeployed", "False", "WaitingForBootstrapData" };
        char *sid;
        cJSON *mm, *node;

        (void)state;
        free(ready_cluster("c5"));
        make_machine("c5", "w2", &(struct machine_spec){ .bootstrap = false });
        cJSON_Delete(wait_obj(&KUBE_RES_MAASMACHINES, "w2", pred_cond_reason, boot));
        kubesim_faults(&G->mgmt,
                       "{\"failNext\":{\"method\":\"PATCH\",\"pathContains\":\"/maasmachines/w2\","
                       "\"count\":2}}");
        patch_main(&KUBE_RES_MACHINES, "w2",
                   "{\"spec\":{\"bootstrap\":{\"dataSecretName\":\"w2-bootstrap\"}}}");
        mm = wait_obj(&KUBE_RES_MAASMACHINES, "w2", pred_ready, NULL);
        sid = xstrdup(json_at_str(mm, "spec.systemID"));
        node = maas_machine(sid);
        assert_string_equal(json_at_str(node, "status_name"), "Deployed");
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 1);
        assert_int_equal(maas_in_use(), 1);
        cJSON_Delete(node);
        cJSON_Delete(mm);
        free(sid);
}

/* B3, R9: a machine whose deploy fails in MAAS is released and replaced by another. */
static void test_machine__failed_deployment_is_replaced(void **state)
{
        struct maas_node_list l = { 0 };
        const struct maas_node *cheapest = NULL;
        char body[256], *sid, *bad;
        cJSON *node;

        (void)state;
        assert_int_equal(
                maas_list_machines(G->maas, &(struct maas_node_filter){ .pool = "capi" }, &l, NULL),
                0);
        for (size_t i = 0; i < l.n; i++) {
                double c = l.items[i].cpu_count + (double)l.items[i].memory_mib / 1024;

                if (!cheapest || c < cheapest->cpu_count + (double)cheapest->memory_mib / 1024)
                        cheapest = &l.items[i];
        }
        bad = xstrdup(cheapest ? cheapest->system_id : "none");
        maas_node_list_release(&l);
        snprintf(body, sizeof(body), "{\"fail_deploy\":[\"%s\"]}", bad);
        cJSON_Delete(maas_admin("POST", "faults", body));
        free(ready_cluster("c6"));
        sid = ready_machine("c6", "w3",
                            &(struct machine_spec){ .bootstrap = true,
                                                    .extra_spec = "\"resourcePool\":\"capi\"" });
        assert_string_not_equal(sid, bad);
        wait_event("MachineReplaced");
        node = maas_machine(bad);
        assert_true(strcmp(json_at_str(node, "status_name"), "Releasing") == 0 ||
                    strcmp(json_at_str(node, "status_name"), "Ready") == 0);
        assert_int_equal(
                maas_in_use() - (strcmp(json_at_str(node, "status_name"), "Releasing") == 0), 1);
        cJSON_Delete(node);
        free(sid);
        free(bad);
}

/* B4: an unknown BMC reading never powers a machine on; two confirmed offs power it on
 * exactly once. B5: while the only control plane looks off, the record keeps its IP. */
static void test_machine__power_policy_and_record_kept(void **state)
{
        char *host = ready_cluster("c7");
        char *sid = ready_machine(
                "c7", "cp1", &(struct machine_spec){ .control_plane = true, .bootstrap = true });
        const char *attached[] = { "DNSAttached", "True", "DNSAttached" };
        char body[256];
        cJSON *mm;
        char *ip;

        (void)state;
        mm = wait_obj(&KUBE_RES_MAASMACHINES, "cp1", pred_cond_reason, attached);
        ip = xstrdup(
                json_at_str(cJSON_GetArrayItem(json_at(mm, "status.addresses"), 1), "address"));
        cJSON_Delete(mm);
        /* MAAS believes it is off, the BMC cannot confirm */
        snprintf(body, sizeof(body), "{\"bmc_unknown\":[\"%s\"],\"power_off\":[\"%s\"]}", sid, sid);
        cJSON_Delete(maas_admin("POST", "faults", body));
        provider_free(G->prov); /* restart: the fleet snapshot must not hide the change */
        G->prov = NULL;
        assert_int_equal(provider_new(&(struct provider_opts){ .settings = test_settings(),
                                                               .kube = &G->mgmt.cfg,
                                                               .maas = &G->mcfg },
                                      &G->prov),
                         0);
        assert_int_equal(provider_start(G->prov), 0);
        wait_event("PowerStateUnknown");
        assert_int_equal(maas_count_requests("\"op\":\"power_on\""), 0);
        mm = wait_obj(&KUBE_RES_MAASMACHINES, "cp1", pred_unpowered, NULL);
        cJSON_Delete(mm);
        patch_main(&KUBE_RES_MAASMACHINES, "cp1",
                   "{\"metadata\":{\"annotations\":{\"poke\":\"0\"}}}");
        sleep_ms(500);                     /* let the cluster see the control plane down */
        assert_true(record_has(host, ip)); /* B5: never emptied by a power blip */
        snprintf(body, sizeof(body), "{\"clear\":true,\"power_off\":[\"%s\"]}", sid);
        cJSON_Delete(maas_admin("POST", "faults", body));
        patch_main(&KUBE_RES_MAASMACHINES, "cp1",
                   "{\"metadata\":{\"annotations\":{\"poke\":\"1\"}}}");
        wait_event("MachinePoweredOn");
        assert_int_equal(maas_count_requests("\"op\":\"power_on\""), 1);
        assert_true(record_has(host, ip));
        free(ip);
        free(sid);
        free(host);
}

/* clusterctl move: delete-for-move removes the finalizer and releases nothing. */
static void test_machine__delete_for_move_releases_nothing(void **state)
{
        char *sid;
        cJSON *node;

        (void)state;
        free(ready_cluster("c8"));
        sid = ready_machine("c8", "w4", &(struct machine_spec){ .bootstrap = true });
        patch_main(&KUBE_RES_MAASMACHINES, "w4",
                   "{\"metadata\":{\"annotations\":{\"clusterctl.cluster.x-k8s.io/"
                   "delete-for-move\":\"\"}}}");
        delete_obj(&KUBE_RES_MAASMACHINES, "w4");
        wait_obj(&KUBE_RES_MAASMACHINES, "w4", NULL, NULL);
        node = maas_machine(sid);
        assert_string_equal(json_at_str(node, "status_name"), "Deployed");
        assert_int_equal(maas_count_requests("\"op\":\"release\""), 0);
        cJSON_Delete(node);
        free(sid);
}

/* R16: a paused cluster's machines are left untouched. */
static void test_machine__paused_cluster_is_left_alone(void **state)
{
        cJSON *mm;

        (void)state;
        free(ready_cluster("c9"));
        patch_main(&KUBE_RES_CLUSTERS, "c9", "{\"spec\":{\"paused\":true}}");
        sleep_ms(200);
        make_machine("c9", "w5", &(struct machine_spec){ .bootstrap = true });
        sleep_ms(1500); /* a negative check: nothing may happen */
        mm = get(&KUBE_RES_MAASMACHINES, "w5");
        assert_null(json_at(mm, "metadata.finalizers"));
        assert_null(json_at(mm, "status"));
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 0);
        cJSON_Delete(mm);
        patch_main(&KUBE_RES_CLUSTERS, "c9", "{\"spec\":{\"paused\":false}}");
        cJSON_Delete(wait_obj(&KUBE_RES_MAASMACHINES, "w5", pred_ready, NULL));
}

/* §7.3 fixed: a providerID naming a machine MAAS no longer has is replaced, not wedged;
 * deleting such a MaasMachine does not wait (§7.10). */
static void test_machine__vanished_machine_is_replaced(void **state)
{
        cJSON *mm;

        (void)state;
        free(ready_cluster("c10"));
        make_machine("c10", "w6",
                     &(struct machine_spec){ .bootstrap = true,
                                             .extra_spec = "\"providerID\":\"maas:///az1/gone00\","
                                                           "\"systemID\":\"gone00\"" });
        mm = wait_obj(&KUBE_RES_MAASMACHINES, "w6", pred_ready, NULL);
        assert_string_not_equal(json_at_str(mm, "spec.systemID"), "gone00");
        assert_true(events_with("MachineNotFound") >= 1);
        cJSON_Delete(mm);
        delete_obj(&KUBE_RES_MAASMACHINES, "w6");
        wait_obj(&KUBE_RES_MAASMACHINES, "w6", NULL, NULL);
        assert_true(events_with("SuccessfulRelease") >= 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_cluster__endpoint_record_and_ready, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_cluster__record_follows_control_planes_and_is_deleted, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_machine__waits_for_infrastructure_and_bootstrap_data, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_machine__deploys_with_constraints_and_sets_node_provider_id, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(test_machine__node_keeps_its_own_zone_label, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_machine__adopts_stamped_machine_after_lost_write, setup, teardown),
                cmocka_unit_test_setup_teardown(test_machine__failed_deployment_is_replaced, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_machine__power_policy_and_record_kept, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_machine__delete_for_move_releases_nothing,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_machine__paused_cluster_is_left_alone, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_machine__vanished_machine_is_replaced, setup,
                                                teardown),
        };

        curl_global_init(CURL_GLOBAL_DEFAULT);
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
