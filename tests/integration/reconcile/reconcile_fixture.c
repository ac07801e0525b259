/*
 * reconcile_fixture: what every reconciler test of this layer stands on (see
 * reconcile_fixture.h).
 */
#include "reconcile_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "base64.h"
#include "buf.h"
#include "json.h"
#include "log.h"
#include "testutil.h"
#include "xalloc.h"

struct reconcile_fixture RF;

bool pred_ready(const cJSON *o, const void *arg)
{
        (void)arg;
        return cJSON_IsTrue(json_at(o, "status.ready"));
}

bool pred_unpowered(const cJSON *o, const void *arg)
{
        (void)arg;
        return cJSON_IsFalse(json_at(o, "status.machinePowered"));
}

bool pred_cond_reason(const cJSON *o, const void *arg)
{
        const char *const *tr = arg; /* { type, status, reason } */

        return cl_cond_is(o, tr[0], tr[1], tr[2]);
}

static void start_maas_sim(void)
{
        char *msg = NULL;

        assert_int_equal(maassim_start(&RF.sim, MAAS_KEY,
                                       (const char *const[]){ "--deploy-seconds", "0.3",
                                                              "--release-seconds", "0.1", NULL }),
                         0);
        assert_int_equal(maas_config_parse(RF.sim.proc.url, MAAS_KEY, &RF.mcfg, &msg), 0);
        free(msg);
        assert_int_equal(http_transport_curl_new(&(struct http_transport_opts){ 0 }, &RF.mt), 0);
        assert_int_equal(
                maas_client_new(&(struct maas_client_opts){ .cfg = &RF.mcfg, .transport = RF.mt },
                                &RF.maas),
                0);
}

/* A Node in the workload API for every machine of the inventory (kubelet joining). */
static void create_workload_nodes(void)
{
        struct maas_node_list l = { 0 };

        assert_int_equal(maas_list_machines(RF.maas, NULL, &l, NULL), 0);
        for (size_t i = 0; i < l.n; i++) {
                cJSON *n =
                        test_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
                                  "\"%s\"}}",
                                  l.items[i].hostname);

                /* fresh per test: no providerID left over from an earlier one */
                (void)!kube_delete(CL.wl, &KUBE_RES_NODES, NULL, l.items[i].hostname, NULL, NULL);
                assert_int_equal(kube_create(CL.wl, &KUBE_RES_NODES, NULL, n, NULL, NULL), 0);
                cJSON_Delete(n);
        }
        maas_node_list_release(&l);
}

/* As capmaas --deploy-timeout 30s --sync-period 10m --machine-concurrency 4 --namespace NS,
 * the rest at their defaults. */
struct provider_settings test_settings(void)
{
        return (struct provider_settings){
                .namespace = CL.ns,
                .sync_period_ms = 600000,
                .machine_concurrency = 4,
                .cluster_concurrency = 2,
                .deploy_timeout_ms = 30000,
                .machine_refresh_ms = 60000,
                .maas_timeout_ms = 30000,
        };
}

void start_provider(const struct provider_settings *s)
{
        assert_int_equal(metrics_new(&RF.metrics), 0);
        assert_int_equal(provider_new(&(struct provider_opts){ .settings = *s,
                                                               .kube = &CL.mgmt.cfg,
                                                               .maas = &RF.mcfg,
                                                               .metrics = RF.metrics },
                                      &RF.prov),
                         0);
        assert_int_equal(provider_start(RF.prov), 0);
}

/* The provider's metrics as Prometheus text (malloc'd). */
char *render_metrics(void)
{
        struct buf b;
        char *out;

        buf_init(&b, 1 << 20);
        assert_int_equal(metrics_render(RF.metrics, &b), 0);
        out = buf_take(&b, NULL);
        buf_release(&b);
        return out;
}

static bool metric_line_there(const void *arg)
{
        const char *line = arg;
        char *text = render_metrics();
        size_t n = strlen(line);
        bool there = false;

        for (const char *p = strstr(text, line); p && !there; p = strstr(p + 1, line))
                there = (p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0');
        free(text);
        return there;
}

void wait_metric(const char *line)
{
        char *text;

        if (cl_eventually(metric_line_there, line))
                return;
        text = render_metrics();
        fprintf(stderr, "%s", text);
        free(text);
        fail_msg("no line \"%s\" in the metrics above", line);
}

static void stop_provider(void)
{
        RF.prov = provider_free(RF.prov);
        RF.metrics = metrics_free(RF.metrics);
}

int rf_group_setup(void **state)
{
        (void)state;
        log_setup(LOG_FORMAT_TEXT, 0, 2);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        return clusters_setup();
}

int rf_group_teardown(void **state)
{
        (void)state;
        clusters_teardown();
        return 0;
}

/* Each test: a fresh MAAS, a fresh namespace, a fresh provider. */
int rf_setup(void **state)
{
        struct provider_settings s = test_settings();

        (void)state;
        start_maas_sim();
        create_workload_nodes();
        clusters_new_namespace();
        start_provider(&s);
        return 0;
}

int rf_teardown(void **state)
{
        (void)state;
        stop_provider();
        maas_client_free(RF.maas);
        http_transport_free(RF.mt);
        maas_config_release(&RF.mcfg);
        maassim_stop(&RF.sim);
        return 0;
}

/* --- the CAPI side, played by the test ------------------------------------------------------ */

const char *UID_OF(const struct kube_resource *r, const char *name, char out[64])
{
        cJSON *o = cl_get(r, name);

        assert_non_null(o);
        snprintf(out, 64, "%s", json_at_str(o, "metadata.uid"));
        cJSON_Delete(o);
        return out;
}

void make_cluster(const char *name, bool infra_ready)
{
        char uid[64];

        cl_create(&KUBE_RES_CLUSTERS,
                  test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\","
                            "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"clusterNetwork\":"
                            "{\"apiServerPort\":6443},\"infrastructureRef\":{\"apiVersion\":"
                            "\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"MaasCluster\","
                            "\"name\":\"%s\"}}}",
                            name, name));
        cl_create(
                &KUBE_RES_MAASCLUSTERS,
                test_json(
                        "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                        "\"MaasCluster\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"cluster.x-k8s."
                        "io/cluster-name\":\"%s\"},\"ownerReferences\":[{\"apiVersion\":\"cluster."
                        "x-k8s.io/v1beta1\",\"kind\":\"Cluster\",\"name\":\"%s\",\"uid\":\"%s\"}]},"
                        "\"spec\":{\"dnsDomain\":\"maas\",\"failureDomains\":[\"az1\",\"az2\"]}}",
                        name, name, name, UID_OF(&KUBE_RES_CLUSTERS, name, uid)));
        if (infra_ready)
                cl_patch(&KUBE_RES_CLUSTERS, name, "status",
                         "{\"status\":{\"infrastructureReady\":true,\"initialization\":"
                         "{\"infrastructureProvisioned\":true}}}");
}

void make_kubeconfig_secret(const char *cluster)
{
        char *text = xmalloc(1 << 16), *b64;
        FILE *f = fopen(CL.workload.kubeconfig, "rb");
        size_t n;

        assert_non_null(f);
        n = fread(text, 1, (1 << 16) - 1, f);
        fclose(f);
        b64 = base64_encode(text, n);
        cl_create(&KUBE_RES_SECRETS,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"%s-kubeconfig\"},\"data\":{\"value\":\"%s\"}}",
                            cluster, b64));
        free(b64);
        free(text);
}

void make_machine(const char *cluster, const char *name, const struct machine_spec *s)
{
        char uid[64], *b64 = base64_encode("#cloud-config\nruncmd: [echo hi]\n", 32);
        const char *cp = s->control_plane ? ",\"cluster.x-k8s.io/control-plane\":\"\"" : "";

        cl_create(&KUBE_RES_SECRETS,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"%s-bootstrap\"},\"data\":{\"value\":\"%s\"}}",
                            name, b64));
        cl_create(
                &KUBE_RES_MACHINES,
                test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Machine\","
                          "\"metadata\":{\"name\":\"%s\",\"labels\":{\"cluster.x-k8s.io/"
                          "cluster-name\":"
                          "\"%s\"%s}},\"spec\":{\"clusterName\":\"%s\",\"bootstrap\":{%s%s%s},"
                          "\"infrastructureRef\":{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/"
                          "v1beta1\",\"kind\":\"MaasMachine\",\"name\":\"%s\"}}}",
                          name, cluster, cp, cluster, s->bootstrap ? "\"dataSecretName\":\"" : "",
                          s->bootstrap ? name : "", s->bootstrap ? "-bootstrap\"" : "", name));
        cl_create(
                &KUBE_RES_MAASMACHINES,
                test_json(
                        "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                        "\"MaasMachine\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"cluster.x-k8s."
                        "io/"
                        "cluster-name\":\"%s\"%s},\"ownerReferences\":[{\"apiVersion\":\"cluster."
                        "x-k8s.io/v1beta1\",\"kind\":\"Machine\",\"name\":\"%s\",\"uid\":\"%s\"}]},"
                        "\"spec\":{\"image\":\"ubuntu/"
                        "jammy\",\"minCPU\":1,\"minMemory\":1024%s%s}}",
                        name, cluster, cp, name, UID_OF(&KUBE_RES_MACHINES, name, uid),
                        s->extra_spec ? "," : "", s->extra_spec ? s->extra_spec : ""));
        free(b64);
}

/* Number of MAAS machines not Ready (allocated, deploying, deployed, ...). */
bool sim_machine_tagged(struct maassim *sim, const char *sid, const char *tag)
{
        cJSON *st = maassim_call(sim, "GET", "state", NULL);
        const cJSON *m, *t;
        bool found = false;

        cJSON_ArrayForEach (m, json_at(st, "machines")) {
                const char *id = json_at_str(m, "system_id");

                if (id && strcmp(id, sid) == 0)
                        cJSON_ArrayForEach (t, json_at(m, "tag_names"))
                                found = found ||
                                        (t->valuestring && strcmp(t->valuestring, tag) == 0);
        }
        cJSON_Delete(st);
        return found;
}

int maas_in_use(void)
{
        cJSON *st = maassim_call(&RF.sim, "GET", "state", NULL);
        const cJSON *m;
        int n = 0;

        cJSON_ArrayForEach (m, json_at(st, "machines")) {
                const char *s = json_at_str(m, "status_name");

                n += s && strcmp(s, "Ready") != 0;
        }
        cJSON_Delete(st);
        return n;
}

int maas_count_requests(const char *needle)
{
        cJSON *log = maassim_call(&RF.sim, "GET", "requests", NULL);
        char *text = log ? cJSON_PrintUnformatted(log) : NULL;
        int n = 0;

        for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p++)
                n++;
        free(text);
        cJSON_Delete(log);
        return n;
}

/* Events in the test namespace with this reason. */
int events_with(const char *reason)
{
        cJSON *l = NULL;
        const cJSON *e;
        int n = 0;

        if (kube_list(CL.kube, &KUBE_RES_EVENTS, CL.ns, NULL, &l, NULL) != 0)
                return 0;
        cJSON_ArrayForEach (e, json_at(l, "items")) {
                const char *r = json_at_str(e, "reason");

                n += r && strcmp(r, reason) == 0;
        }
        cJSON_Delete(l);
        return n;
}

/* The recorder writes events on its own thread: wait for at least n of them. */
void wait_events(const char *reason, int n)
{
        int seen = 0;

        for (unsigned t = 0; t < CLUSTERS_WAIT_MS; t += 100) {
                seen = events_with(reason);
                if (seen >= n)
                        return;
                cl_sleep_ms(100);
        }
        fail_msg("%d %s event(s), wanted at least %d", seen, reason, n);
}

void wait_event(const char *reason)
{
        wait_events(reason, 1);
}

const char *mm_external_ip(const cJSON *mm)
{
        const cJSON *a;

        cJSON_ArrayForEach (a, json_at(mm, "status.addresses"))
                if (strcmp(OR(json_at_str(a, "type"), ""), "ExternalIP") == 0)
                        return json_at_str(a, "address");
        return NULL;
}

bool record_has(const char *fqdn, const char *ip)
{
        cJSON *st = maassim_call(&RF.sim, "GET", "state", NULL);
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

int n_records(void)
{
        cJSON *st = maassim_call(&RF.sim, "GET", "state", NULL);
        const cJSON *d;
        int n = 0;

        cJSON_ArrayForEach (d, json_at(st, "dnsresources"))
                n += strncmp(OR(json_at_str(d, "fqdn"), ""), "capmaas-vip-", 12) != 0;
        cJSON_Delete(st);
        return n;
}

char *ready_cluster(const char *name)
{
        const char *api_up[] = { "APIServerAvailable", "True", "APIServerAvailable" };
        cJSON *mc;
        char *host;

        make_cluster(name, true);
        make_kubeconfig_secret(name);
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, name, pred_cond_reason, api_up);
        host = xstrdup(json_at_str(mc, "spec.controlPlaneEndpoint.host"));
        assert_true(cl_cond_is(mc, "Ready", "True", NULL));
        cJSON_Delete(mc);
        return host;
}

char *ready_machine(const char *cluster, const char *name, const struct machine_spec *s)
{
        cJSON *mm;
        char *sid;

        make_machine(cluster, name, s);
        mm = cl_wait(&KUBE_RES_MAASMACHINES, name, pred_ready, NULL);
        sid = xstrdup(json_at_str(mm, "spec.systemID"));
        cJSON_Delete(mm);
        return sid;
}

cJSON *wait_node_provider_id(const char *hostname)
{
        cJSON *wnode = NULL;

        for (unsigned t = 0; t < CLUSTERS_WAIT_MS; t += 50) {
                cJSON_Delete(wnode);
                wnode = NULL;
                assert_int_equal(kube_get(CL.wl, &KUBE_RES_NODES, NULL, hostname, &wnode, NULL), 0);
                if (json_at_str(wnode, "spec.providerID"))
                        return wnode;
                cl_sleep_ms(50);
        }
        fail_msg("Node %s never got a providerID", hostname);
        return NULL;
}

const char *node_zone_label(const cJSON *wnode)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(json_at(wnode, "metadata.labels"),
                                                          "topology.kubernetes.io/zone");

        return cJSON_IsString(v) ? v->valuestring : NULL;
}
