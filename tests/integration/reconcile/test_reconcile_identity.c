/*
 * Per-cluster MAAS credentials (issue 21 item 1, docs/credentials.md): a MaasCluster's
 * spec.identityRef names a Secret with another MAAS's endpoint and key. Two maas-sims: A (the
 * fixture's, the process-wide MAAS) and B, whose inventory's system IDs and hostnames start
 * with "b-", so each sim's request log tells whose machines it served. The provider's log
 * goes to a file the tests grep for the keys. (reconcile_fixture.h: kube-sims, maas-sim and
 * the provider over real loopback TLS/HTTP; the test plays the CAPI core controllers.)
 * ctest: concurrency
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base64.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "maas_inventory.h"
#include "reconcile_fixture.h"
#include "rfc3339.h"
/* the reconcile library's private headers: the identity pool's count */
#include "../../../reconcile/maas_identity.h"
#include "../../../reconcile/reconciler.h"
#include "testutil.h"
#include "xalloc.h"

/* Long parts, so a leak of any one of them is found by a grep. */
#define KEY_B   "ckb-consumer-4711:tkb-token-key-0815:tsb-token-secret-2342"
#define KEY_B2  "ckb2-consumer-9001:tkb2-token-key-1122:tsb2-token-secret-3344"
#define KEY_BAD "ckx-unknown-consumer:tkx-unknown-token:tsx-unknown-secret"

static struct maassim SIM_B;
static char INV_B[64];
static char LOG_PATH[64];
static int LOG_FD = -1;

/* The sample inventory with every system ID and hostname prefixed "b-". */
static void write_inventory_b(void)
{
        char src[512], line[1024];
        FILE *in, *out;
        int fd;

        snprintf(src, sizeof(src), "%s/tests/sim/maas/inventory-sample.yaml",
                 test_env("CAPMAAS_SOURCE_DIR"));
        snprintf(INV_B, sizeof(INV_B), "/tmp/capmaas-inv-b-XXXXXX");
        fd = mkstemp(INV_B);
        assert_true(fd >= 0);
        in = fopen(src, "r");
        out = fdopen(fd, "w");
        assert_non_null(in);
        assert_non_null(out);
        while (fgets(line, sizeof(line), in)) {
                char *p;

                if ((p = strstr(line, "system_id: ")) || (p = strstr(line, "    hostname: "))) {
                        char *v = strchr(p, ':') + 2;

                        fprintf(out, "%.*sb-%s", (int)(v - line), line, v);
                } else {
                        fputs(line, out);
                }
        }
        fclose(in);
        fclose(out);
}

/* Nodes in the workload API for B's machines (the fixture made A's). */
static void create_nodes_b(void)
{
        cJSON *st = maassim_call(&SIM_B, "GET", "state", NULL);
        const cJSON *m;

        cJSON_ArrayForEach (m, json_at(st, "machines")) {
                cJSON *n = test_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{"
                                     "\"name\":\"%s\"}}",
                                     json_at_str(m, "hostname"));

                (void)!kube_delete(CL.wl, &KUBE_RES_NODES, NULL, json_at_str(m, "hostname"), NULL,
                                   NULL);
                assert_int_equal(kube_create(CL.wl, &KUBE_RES_NODES, NULL, n, NULL, NULL), 0);
                cJSON_Delete(n);
        }
        cJSON_Delete(st);
}

static const char *DEPLOY_S_B = "0.3";
static const char *INV_SIM_B = INV_B; /* the inventory SIM_B serves */

static int ident_setup(void **state)
{
        snprintf(LOG_PATH, sizeof(LOG_PATH), "/tmp/capmaas-ident-log-XXXXXX");
        LOG_FD = mkstemp(LOG_PATH);
        if (LOG_FD < 0)
                return -1;
        log_setup(LOG_FORMAT_JSON, 4, LOG_FD); /* trace: every record the provider writes */
        write_inventory_b();
        if (maassim_start(&SIM_B, KEY_B,
                          (const char *const[]){ "--inventory", INV_SIM_B, "--deploy-seconds",
                                                 DEPLOY_S_B, "--release-seconds", "0.1", NULL }) !=
            0)
                return -1;
        rf_setup(state);
        create_nodes_b();
        return 0;
}

/* B deploys in 2 s: a rollout is still under way when its key is rotated. */
static int ident_setup_slow(void **state)
{
        DEPLOY_S_B = "2";
        return ident_setup(state);
}

/* --- MAAS B with its own zones: the inventories of the per-cluster MAAS -------------------- */

/* B's machines: 48 and 64 cores in zones site-c1 and site-c2 (zone site-c3 empty). */
static const char INV_C_TEXT[] =
        "zones:\n  - name: site-c1\n  - name: site-c2\n  - name: site-c3\n"
        "pools:\n  - name: capi\n"
        "machines:\n"
        "  - system_id: b-big1\n    hostname: b-big1\n    cpu_count: 48\n    memory: 65536\n"
        "    zone: site-c1\n    pool: capi\n    architecture: amd64/generic\n"
        "  - system_id: b-big2\n    hostname: b-big2\n    cpu_count: 64\n    memory: 131072\n"
        "    zone: site-c2\n    pool: capi\n    architecture: amd64/generic\n";
static char INV_C[64];

/* The provider's source of per-cluster inventories, played by the test: Secret maas-b's is
 * an inventory of SIM_B (refreshed every 300 ms), any other Secret has none. */
static struct {
        struct maas_config cfg, cfg_a;
        struct maas_inventory *b, *a; /* B's; A's (the process-wide inventory) */
        provider_ident_inventory_fn *fn;
        void *arg;
        pthread_mutex_t lock;
        int acquired;
} SRC = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int src_acquire(
        void *ud, const char *ns, const char *secret, struct maas_inventory **ret, char **ret_why)
{
        (void)ud;
        (void)ns;
        *ret = NULL;
        if (strcmp(secret, "maas-b") != 0) {
                *ret_why = xasprintf("no Secret %s", secret);
                return CM_ENOTFOUND;
        }
        pthread_mutex_lock(&SRC.lock);
        SRC.acquired++;
        pthread_mutex_unlock(&SRC.lock);
        *ret = SRC.b;
        return 0;
}

static void src_release(void *ud, struct maas_inventory *inv)
{
        (void)ud;
        assert_ptr_equal(inv, SRC.b);
}

static void src_on_refresh(void *ud, const struct maas_inventory_snapshot *snap)
{
        (void)ud;
        pthread_mutex_lock(&SRC.lock);
        if (SRC.fn)
                SRC.fn(SRC.arg, CL.ns, "maas-b", snap);
        pthread_mutex_unlock(&SRC.lock);
}

static void src_set_listener(void *ud, provider_ident_inventory_fn *fn, void *arg)
{
        (void)ud;
        pthread_mutex_lock(&SRC.lock);
        SRC.fn = fn;
        SRC.arg = arg;
        pthread_mutex_unlock(&SRC.lock);
}

static const struct provider_inventory_source SOURCE = { .acquire = src_acquire,
                                                         .release = src_release,
                                                         .set_listener = src_set_listener };

static int ident_setup_zones(void **state)
{
        FILE *f;
        int fd;

        snprintf(INV_C, sizeof(INV_C), "/tmp/capmaas-inv-c-XXXXXX");
        fd = mkstemp(INV_C);
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f)
                return -1;
        fputs(INV_C_TEXT, f);
        fclose(f);
        INV_SIM_B = INV_C;
        return ident_setup(state);
}

static struct maas_inventory *inventory_of(const char *url, const char *key, struct maas_config *c)
{
        struct maas_inventory *inv = NULL;

        assert_int_equal(maas_config_parse(url, key, c, NULL), 0);
        assert_int_equal(
                maas_inventory_new(&(struct maas_inventory_opts){ .cfg = c, .interval_ms = 300 },
                                   &inv),
                0);
        return inv;
}

/* The provider with A's inventory as the process-wide one and SOURCE for B's, kept hosts
 * held for hold_ms. */
static void start_provider_with_inventories_hold(uint64_t hold_ms)
{
        struct provider_settings s = test_settings();

        s.reuse_hold_ms = hold_ms;
        RF.prov = provider_free(RF.prov); /* rf_setup's, without inventories */
        RF.metrics = metrics_free(RF.metrics);
        SRC.a = inventory_of(RF.sim.proc.url, MAAS_KEY, &SRC.cfg_a);
        SRC.b = inventory_of(SIM_B.proc.url, KEY_B, &SRC.cfg);
        maas_inventory_set_listener(SRC.b, src_on_refresh, NULL);
        assert_int_equal(metrics_new(&RF.metrics), 0);
        assert_int_equal(provider_new(&(struct provider_opts){ .settings = s,
                                                               .kube = &CL.mgmt.cfg,
                                                               .maas = &RF.mcfg,
                                                               .metrics = RF.metrics,
                                                               .inventory = SRC.a,
                                                               .ident_inventories = &SOURCE },
                                      &RF.prov),
                         0);
        assert_int_equal(provider_start(RF.prov), 0);
}

static void start_provider_with_inventories(void)
{
        start_provider_with_inventories_hold(0);
}

/* B's machines as in INV_C_TEXT, each kept for an owner in MAAS B: b-big1 (tag ...bbb) since
 * two hours, b-big2 (tag ...ccc) since now; tag ...ddd on no machine. */
static int ident_setup_kept(void **state)
{
        char old[RFC3339_LEN], now[RFC3339_LEN];
        FILE *f;
        int fd;

        rfc3339_format(time(NULL) - 7200, old);
        rfc3339_format(time(NULL), now);
        snprintf(INV_C, sizeof(INV_C), "/tmp/capmaas-inv-c-XXXXXX");
        fd = mkstemp(INV_C);
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f)
                return -1;
        fprintf(f,
                "tags:\n"
                "  - name: capmaas-reuse-bbbbbbbbbbbb\n"
                "    comment: \"capmaas: hosts kept; held since: b-big1=%s\"\n"
                "  - name: capmaas-reuse-cccccccccccc\n"
                "    comment: \"capmaas: hosts kept; held since: b-big2=%s\"\n"
                "  - name: capmaas-reuse-dddddddddddd\n"
                "zones:\n  - name: site-c1\n  - name: site-c2\n"
                "pools:\n  - name: capi\n"
                "machines:\n"
                "  - system_id: b-big1\n    hostname: b-big1\n    cpu_count: 48\n"
                "    memory: 65536\n    zone: site-c1\n    pool: capi\n"
                "    architecture: amd64/generic\n    tags: [capmaas-reuse-bbbbbbbbbbbb]\n"
                "  - system_id: b-big2\n    hostname: b-big2\n    cpu_count: 64\n"
                "    memory: 131072\n    zone: site-c2\n    pool: capi\n"
                "    architecture: amd64/generic\n    tags: [capmaas-reuse-cccccccccccc]\n",
                old, now);
        fclose(f);
        INV_SIM_B = INV_C;
        return ident_setup(state);
}

static int ident_teardown(void **state)
{
        DEPLOY_S_B = "0.3";
        rf_teardown(state);
        if (INV_SIM_B == INV_C) {
                SRC.a = maas_inventory_free(SRC.a);
                SRC.b = maas_inventory_free(SRC.b);
                maas_config_release(&SRC.cfg);
                maas_config_release(&SRC.cfg_a);
                unlink(INV_C);
                INV_SIM_B = INV_B;
        }
        maassim_stop(&SIM_B);
        log_setup(LOG_FORMAT_TEXT, 0, 2);
        close(LOG_FD);
        unlink(LOG_PATH);
        unlink(INV_B);
        return 0;
}

/* Secret name in the test namespace holding endpoint and key (and no caBundle). */
static void make_identity_secret(const char *name, const char *endpoint, const char *key)
{
        char *ep = base64_encode(endpoint, strlen(endpoint));
        char *k = base64_encode(key, strlen(key));

        cl_create(&KUBE_RES_SECRETS,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"%s\"},\"data\":{\"endpoint\":\"%s\",\"apiKey\":\"%s\"}}",
                            name, ep, k));
        free(ep);
        free(k);
}

static void set_identity_key(const char *name, const char *key)
{
        char *k = base64_encode(key, strlen(key));
        char *body = xasprintf("{\"data\":{\"apiKey\":\"%s\"}}", k);

        cl_patch(&KUBE_RES_SECRETS, name, NULL, body);
        free(body);
        free(k);
}

/* A Cluster and its MaasCluster naming Secret secret, infrastructure provisioned, with its
 * kubeconfig Secret. */
static void make_ident_cluster(const char *name, const char *secret)
{
        char uid[64];

        cl_create(&KUBE_RES_CLUSTERS,
                  test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\","
                            "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"clusterNetwork\":"
                            "{\"apiServerPort\":6443},\"infrastructureRef\":{\"apiVersion\":"
                            "\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"MaasCluster\","
                            "\"name\":\"%s\"}}}",
                            name, name));
        cl_create(&KUBE_RES_MAASCLUSTERS,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                            "\"MaasCluster\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"cluster."
                            "x-k8s.io/cluster-name\":\"%s\"},\"ownerReferences\":[{\"apiVersion\":"
                            "\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\",\"name\":\"%s\","
                            "\"uid\":\"%s\"}]},\"spec\":{\"dnsDomain\":\"maas\",\"failureDomains\":"
                            "[\"az1\",\"az2\"],\"identityRef\":{\"kind\":\"Secret\",\"name\":"
                            "\"%s\"}}}",
                            name, name, name, UID_OF(&KUBE_RES_CLUSTERS, name, uid), secret));
        cl_patch(&KUBE_RES_CLUSTERS, name, "status",
                 "{\"status\":{\"infrastructureReady\":true,\"initialization\":"
                 "{\"infrastructureProvisioned\":true}}}");
        make_kubeconfig_secret(name);
}

static const char *const API_UP[] = { "APIServerAvailable", "True", "APIServerAvailable" };

/* The next sep-separated token of *s (cut in place), or NULL at the end. */
static char *next_token(char **s, char sep)
{
        char *tok = *s, *end;

        if (!tok || !*tok)
                return NULL;
        end = strchr(tok, sep);
        if (end)
                *end++ = '\0';
        *s = end;
        return tok;
}

/* Fails when id (a system ID sim was asked about) is another MAAS's; returns 1. */
static int is_other(const struct maassim *sim, const char *prefix, const char *id, const char *path)
{
        bool b = strncmp(id, "b-", 2) == 0;

        if (prefix ? !b : b)
                fail_msg("%s asked for another MAAS's machine %s (%s)", sim->root, id, path);
        return 1;
}

/* Every system ID in sim's request log (machines/<id>/ paths) starts with prefix (or, with
 * prefix NULL, none starts with "b-"), and every agent_name there is one of uids. */
static void log_only(struct maassim *sim, const char *prefix, const char *const *uids, size_t n)
{
        cJSON *log = maassim_call(sim, "GET", "requests", NULL);
        const cJSON *e;
        int seen = 0;

        cJSON_ArrayForEach (e, json_at(log, "requests")) {
                const char *path = OR(json_at_str(e, "path"), "");
                const char *an = json_at_str(e, "agent_name");
                const char *m = strstr(path, "/machines/");
                char *ids = xstrdup(OR(json_at_str(e, "ids"), "")), *rest = ids;
                bool ok = false;

                if (m && m[10])
                        seen += is_other(sim, prefix, m + 10, path);
                for (char *id; (id = next_token(&rest, ',')) != NULL;)
                        seen += is_other(sim, prefix, id, path);
                free(ids);
                if (an && *an) {
                        for (size_t i = 0; i < n; i++)
                                ok = ok || strcmp(an, uids[i]) == 0;
                        if (!ok)
                                fail_msg("%s saw agent_name %s of another cluster", sim->root, an);
                }
        }
        if (seen == 0) {
                char *t = cJSON_PrintUnformatted(log);

                fprintf(stderr, "%.3000s\n", t);
                free(t);
        }
        assert_true(seen > 0);
        cJSON_Delete(log);
}

/* Every part of key is absent from text. */
static void no_key_in(const char *what, const char *text, const char *key)
{
        char *k = xstrdup(key), *rest = k;

        assert_null(strstr(text, key));
        for (char *part; (part = next_token(&rest, ':')) != NULL;)
                if (strstr(text, part))
                        fail_msg("%s holds part of the key (%s)", what, part);
        free(k);
}

static char *read_log(void)
{
        FILE *f = fopen(LOG_PATH, "rb");
        char *text = xmalloc(64 << 20);
        size_t n;

        assert_non_null(f);
        n = fread(text, 1, (64 << 20) - 1, f);
        fclose(f);
        text[n] = '\0';
        return text;
}

/* Logs, events, conditions (every object of the namespace) and metrics hold no part of key. */
static void key_nowhere(const char *key)
{
        const struct kube_resource *kinds[] = { &KUBE_RES_MAASCLUSTERS, &KUBE_RES_MAASMACHINES,
                                                &KUBE_RES_EVENTS };
        char *text = read_log();

        assert_non_null(strstr(text, "MAAS identity loaded")); /* the records are there */
        no_key_in("the provider's log", text, key);
        free(text);
        for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
                cJSON *l = cl_list(kinds[i], NULL);

                text = cJSON_PrintUnformatted(l);
                no_key_in(kinds[i]->plural, text, key);
                free(text);
                cJSON_Delete(l);
        }
        text = render_metrics();
        no_key_in("the metrics", text, key);
        free(text);
}

/* capmaas_maas_identity_budget_requests_total of Secret name in the test namespace, or -1
 * when there is no such series. */
static double budget_requests(const char *name)
{
        char *text = render_metrics();
        char *line = xasprintf("\ncapmaas_maas_identity_budget_requests_total{identity=\"%s/%s\"} ",
                               CL.ns, name);
        const char *at = strstr(text, line);
        double v = at ? strtod(at + strlen(line), NULL) : -1;

        free(line);
        free(text);
        return v;
}

static bool no_identity(const void *arg)
{
        (void)arg;
        return maas_ident_count(RF.prov->idents) == 0;
}

/* Acceptance: two clusters, two MAAS: each cluster's machines (and its DNS record) come from
 * its own MAAS only; the default stays the process-wide one. */
static void test_identity__each_cluster_uses_its_own_maas(void **state)
{
        char ua[2][64], ud[2][64], *sid;
        const char *uids_a[2], *uids_d[2];
        const char *names_b[] = { "b0", "b1" }, *names_d[] = { "d0", "d1" };
        cJSON *mc;

        (void)state;
        make_identity_secret("maas-b", SIM_B.proc.url, KEY_B);
        make_ident_cluster("cb", "maas-b");
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "cb", pred_cond_reason, API_UP));
        free(ready_cluster("cd"));
        for (size_t i = 0; i < 2; i++) {
                sid = ready_machine("cb", names_b[i], &(struct machine_spec){ .bootstrap = true });
                assert_memory_equal(sid, "b-", 2);
                free(sid);
                sid = ready_machine("cd", names_d[i], &(struct machine_spec){ .bootstrap = true });
                assert_memory_not_equal(sid, "b-", 2);
                free(sid);
                uids_a[i] = UID_OF(&KUBE_RES_MAASMACHINES, names_b[i], ua[i]);
                uids_d[i] = UID_OF(&KUBE_RES_MAASMACHINES, names_d[i], ud[i]);
        }
        log_only(&SIM_B, "b-", uids_a, 2);
        log_only(&RF.sim, NULL, uids_d, 2);
        /* the DNS record of cb is in B, cd's in A */
        assert_int_equal(n_records(), 1);
        mc = cl_get(&KUBE_RES_MAASCLUSTERS, "cb");
        assert_true(cl_cond_is(mc, "MAASAvailable", "True", "MAASAvailable"));
        assert_true(cl_cond_is(mc, "Ready", "True", NULL));
        cJSON_Delete(mc);
        mc = cl_get(&KUBE_RES_MAASCLUSTERS, "cd");
        assert_null(cl_condition(mc, "MAASAvailable")); /* no identity: nothing new */
        cJSON_Delete(mc);
        mc = maassim_call(&SIM_B, "GET", "state", NULL);
        assert_int_equal(cJSON_GetArraySize(json_at(mc, "dnsresources")), 1);
        cJSON_Delete(mc);

        /* delete: each machine is released in its own MAAS */
        cl_delete(&KUBE_RES_MAASMACHINES, "b0");
        cl_delete(&KUBE_RES_MAASMACHINES, "d0");
        assert_null(cl_wait(&KUBE_RES_MAASMACHINES, "b0", NULL, NULL));
        assert_null(cl_wait(&KUBE_RES_MAASMACHINES, "d0", NULL, NULL));
        log_only(&SIM_B, "b-", uids_a, 2);
        log_only(&RF.sim, NULL, uids_d, 2);

        /* B's budget is counted apart, named by its Secret (never a key) */
        assert_true(budget_requests("maas-b") > 0);

        /* the cluster goes: its record is deleted in B, and no cluster names the identity
         * any more, so the pool forgets it, and its budget's series with it */
        assert_int_equal(maas_ident_count(RF.prov->idents), 1);
        cl_delete(&KUBE_RES_MAASMACHINES, "b1");
        assert_null(cl_wait(&KUBE_RES_MAASMACHINES, "b1", NULL, NULL));
        cl_delete(&KUBE_RES_MAASCLUSTERS, "cb");
        assert_null(cl_wait(&KUBE_RES_MAASCLUSTERS, "cb", NULL, NULL));
        assert_true(cl_eventually(no_identity, NULL));
        mc = maassim_call(&SIM_B, "GET", "state", NULL);
        assert_int_equal(cJSON_GetArraySize(json_at(mc, "dnsresources")), 0);
        cJSON_Delete(mc);
        assert_int_equal(n_records(), 1); /* cd's, in A, untouched */
        key_nowhere(KEY_B);
        assert_true(budget_requests("maas-b") < 0);
}

static bool status_is(const cJSON *logged, int status)
{
        const cJSON *st = json_at(logged, "status");

        return cJSON_IsNumber(st) && st->valueint == status;
}

static bool all_ready(const void *arg)
{
        const char *const *names = arg;
        bool ok = true;

        for (size_t i = 0; names[i] && ok; i++) {
                cJSON *mm = cl_get(&KUBE_RES_MAASMACHINES, names[i]);

                ok = mm && cJSON_IsTrue(json_at(mm, "status.ready"));
                cJSON_Delete(mm);
        }
        return ok;
}

static bool allocated(const void *arg)
{
        cJSON *mm = cl_get(&KUBE_RES_MAASMACHINES, arg);
        bool ok = mm && json_at_str(mm, "spec.systemID");

        cJSON_Delete(mm);
        return ok;
}

/* Acceptance: the key is rotated in MAAS and in the Secret mid-rollout, the old key refused
 * at once: the rollout finishes on the new key, without a restart. */
static void test_identity__rotation_mid_rollout_finishes(void **state)
{
        static const char *const names[] = { "r0", "r1", "r2", "r3", NULL };
        cJSON *log, *mc;
        const cJSON *e;
        int after = 0;

        (void)state;
        make_identity_secret("maas-b", SIM_B.proc.url, KEY_B);
        make_ident_cluster("cr", "maas-b");
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "cr", pred_cond_reason, API_UP));
        for (size_t i = 0; names[i]; i++)
                make_machine("cr", names[i], &(struct machine_spec){ .bootstrap = true });
        assert_true(cl_eventually(allocated, "r0")); /* the rollout is under way */
        assert_false(all_ready(names));
        cJSON_Delete(maassim_call(&SIM_B, "POST", "keys", "{\"add\":\"" KEY_B2 "\"}"));
        set_identity_key("maas-b", KEY_B2);
        cJSON_Delete(maassim_call(&SIM_B, "POST", "reset-log", NULL));
        cJSON_Delete(maassim_call(&SIM_B, "POST", "keys", "{\"revoke\":\"ckb-consumer-4711\"}"));
        assert_true(cl_eventually(all_ready, names));
        /* after the revocation MAAS answered the new key: requests went on and succeeded */
        log = maassim_call(&SIM_B, "GET", "requests", NULL);
        cJSON_ArrayForEach (e, json_at(log, "requests"))
                after += status_is(e, 200);
        assert_true(after > 0);
        cJSON_Delete(log);
        mc = cl_get(&KUBE_RES_MAASCLUSTERS, "cr");
        assert_true(cl_cond_is(mc, "MAASAvailable", "True", NULL));
        cJSON_Delete(mc);
        key_nowhere(KEY_B);
        key_nowhere(KEY_B2);
}

/* Acceptance: a wrong key, a malformed one, a missing Secret and an endpoint nobody answers
 * are conditions and events
 * with clear messages, not a crash and not a storm; a fixed Secret is picked up. */
static void test_identity__bad_credentials_are_conditions(void **state)
{
        const char *unauth[] = { "MAASAvailable", "False", "MAASUnauthorized" };
        const char *invalid[] = { "MAASAvailable", "False", "IdentityInvalid" };
        const char *missing[] = { "MAASAvailable", "False", "IdentitySecretNotFound" };
        const char *unreach[] = { "MAASAvailable", "False", "MAASUnreachable" };
        cJSON *mc, *mm;
        int n401;

        (void)state;
        make_identity_secret("wrong", SIM_B.proc.url, KEY_BAD);
        make_identity_secret("malformed", SIM_B.proc.url, "no-colons-in-this-key");
        make_ident_cluster("cw", "wrong");
        make_ident_cluster("cm", "malformed");
        make_ident_cluster("cn", "nowhere");
        make_identity_secret("unreachable", "http://127.0.0.1:9/MAAS", KEY_B); /* discard port */
        make_ident_cluster("cu", "unreachable");
        make_machine("cw", "w0", &(struct machine_spec){ .bootstrap = true });

        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "cw", pred_cond_reason, unauth);
        assert_non_null(strstr(json_at_str(cl_condition(mc, "MAASAvailable"), "message"),
                               "refused the apiKey of Secret"));
        cJSON_Delete(mc);
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "w0", pred_cond_reason, unauth);
        assert_null(json_at_str(mm, "spec.systemID"));
        cJSON_Delete(mm);
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "cm", pred_cond_reason, invalid);
        assert_non_null(
                strstr(json_at_str(cl_condition(mc, "MAASAvailable"), "message"), "data.apiKey"));
        cJSON_Delete(mc);
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "cn", pred_cond_reason, missing);
        assert_non_null(
                strstr(json_at_str(cl_condition(mc, "MAASAvailable"), "message"), "nowhere"));
        cJSON_Delete(mc);
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "cu", pred_cond_reason, unreach);
        assert_non_null(strstr(json_at_str(cl_condition(mc, "MAASAvailable"), "message"),
                               "cannot be reached"));
        cJSON_Delete(mc);
        wait_event("MAASUnauthorized");
        wait_event("MAASUnreachable");
        wait_event("IdentityInvalid");
        wait_event("IdentitySecretNotFound");

        /* no storm: over 3 s, a wrong key costs a few probes, not a request per pass */
        cJSON_Delete(maassim_call(&SIM_B, "POST", "reset-log", NULL));
        cl_sleep_ms(3000);
        n401 = 0;
        {
                cJSON *log = maassim_call(&SIM_B, "GET", "requests", NULL);
                const cJSON *e;

                cJSON_ArrayForEach (e, json_at(log, "requests"))
                        n401 += status_is(e, 401);
                cJSON_Delete(log);
        }
        print_message("a wrong key: %d MAAS 401s in 3 s\n", n401);
        assert_true(n401 <= 4);
        key_nowhere(KEY_BAD);

        /* fixed: the next read of the Secret (within its backoff) picks up the good key */
        set_identity_key("wrong", KEY_B);
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "w0", pred_ready, NULL);
        assert_memory_equal(json_at_str(mm, "spec.systemID"), "b-", 2);
        cJSON_Delete(mm);
        key_nowhere(KEY_B);
}

/* How many times Secret name of the test namespace was read (GET) since the log was cleared. */
static int secret_reads(const char *name)
{
        char *suffix = xasprintf("/namespaces/%s/secrets/%s", CL.ns, name);
        int n = kubesim_count_requests(
                &CL.mgmt, &(struct kubesim_match){ .method = "GET", .path_suffix = suffix });

        free(suffix);
        return n;
}

#define N_WAITING 16

static bool all_missing(const void *arg)
{
        const char *missing[] = { "MAASAvailable", "False", "IdentitySecretNotFound" };
        char name[16];
        bool ok = true;

        (void)arg;
        for (int i = 0; i < N_WAITING && ok; i++) {
                cJSON *mm;

                snprintf(name, sizeof(name), "m%d", i);
                mm = cl_get(&KUBE_RES_MAASMACHINES, name);
                ok = mm && pred_cond_reason(mm, missing);
                cJSON_Delete(mm);
        }
        return ok;
}

static bool all_allocated(const void *arg)
{
        char name[16];
        bool ok = true;

        (void)arg;
        for (int i = 0; i < N_WAITING && ok; i++) {
                snprintf(name, sizeof(name), "m%d", i);
                ok = allocated(name);
        }
        return ok;
}

/* A missing Secret is remembered per identity: 16 MaasMachines on 16 workers waiting for it
 * (their passes come back together when the backoff runs out) read it once per backoff step
 * and poll, not once per pass; created, it is picked up and the machines allocated. */
static void test_identity__a_missing_secret_is_read_once(void **state)
{
        struct provider_settings s = test_settings();
        long long t0;
        char name[16];
        int reads;

        (void)state;
        RF.prov = provider_free(RF.prov); /* rf_setup's, with 4 workers */
        RF.metrics = metrics_free(RF.metrics);
        s.machine_concurrency = N_WAITING;
        start_provider(&s);
        make_ident_cluster("cn", "later");
        for (int i = 0; i < N_WAITING; i++) {
                snprintf(name, sizeof(name), "m%d", i);
                make_machine("cn", name, &(struct machine_spec){ .bootstrap = true });
        }
        assert_true(cl_eventually(all_missing, NULL));
        /* 8 s: two backoff steps run out (at 3 s and 7 s after the first read) and the 5 s
         * poll reads once or twice; without the negative cache each step is a read per
         * worker that comes back */
        kubesim_clear_requests(&CL.mgmt);
        cl_sleep_ms(8000);
        reads = secret_reads("later");
        print_message("reads of the missing Secret in 8 s: %d\n", reads);
        /* at most 5 (11 before); none is possible under load, two reads being up to about
         * 10 s apart by design; that the Secret is still read shows below */
        assert_in_range(reads, 0, 5);

        t0 = test_now_ms();
        make_identity_secret("later", SIM_B.proc.url, KEY_B);
        assert_true(cl_eventually(all_allocated, NULL));
        print_message("all %d allocated %lld ms after the Secret appeared\n", N_WAITING,
                      test_now_ms() - t0);
}

/* The status_name of system ID sid in sim (a new string), or NULL. */
static char *sim_status(struct maassim *sim, const char *sid)
{
        cJSON *st = maassim_call(sim, "GET", "state", NULL);
        const cJSON *m;
        char *out = NULL;

        cJSON_ArrayForEach (m, json_at(st, "machines"))
                if (strcmp(OR(json_at_str(m, "system_id"), ""), sid) == 0)
                        out = xstrdup(OR(json_at_str(m, "status_name"), "?"));
        cJSON_Delete(st);
        return out;
}

/* Touches MaasCluster name (an annotation) until the pool has read its Secret missing: the
 * identity it built is used for up to MAAS_IDENT_RECHECK_MS after its last read. */
static void until_secret_missing(const char *name)
{
        const char *missing[] = { "MAASAvailable", "False", "IdentitySecretNotFound" };

        for (int i = 0; i < 60; i++) {
                char *body =
                        xasprintf("{\"metadata\":{\"annotations\":{\"test/touch\":\"%d\"}}}", i);
                cJSON *mc;
                bool gone;

                cl_patch(&KUBE_RES_MAASCLUSTERS, name, NULL, body);
                free(body);
                mc = cl_get(&KUBE_RES_MAASCLUSTERS, name);
                gone = mc && pred_cond_reason(mc, missing);
                cJSON_Delete(mc);
                if (gone)
                        return;
                cl_sleep_ms(500);
        }
        fail_msg("MaasCluster %s never saw its Secret missing", name);
}

/* A Warning event about kind/name whose message holds every one of words (NULL-ended). */
static bool event_says(const char *kind, const char *name, const char *const *words)
{
        cJSON *l = cl_list(&KUBE_RES_EVENTS, NULL);
        const cJSON *e;
        bool found = false;

        cJSON_ArrayForEach (e, json_at(l, "items")) {
                const char *msg = OR(json_at_str(e, "message"), "");
                bool all = strcmp(OR(json_at_str(e, "involvedObject.kind"), ""), kind) == 0 &&
                           strcmp(OR(json_at_str(e, "involvedObject.name"), ""), name) == 0 &&
                           strcmp(OR(json_at_str(e, "type"), ""), "Warning") == 0;

                for (size_t i = 0; all && words[i]; i++)
                        all = strstr(msg, words[i]) != NULL;
                found = found || all;
        }
        cJSON_Delete(l);
        return found;
}

static bool deleting_said(const cJSON *o, const void *arg)
{
        const char *const *words = arg;
        const cJSON *c = cl_condition(o, "MAASAvailable");
        const char *msg = OR(json_at_str(c, "message"), "");

        if (!cl_cond_is(o, "MAASAvailable", "False", "IdentitySecretNotFound"))
                return false;
        for (size_t i = 0; words[i]; i++)
                if (!strstr(msg, words[i]))
                        return false;
        return true;
}

struct event_wait {
        const char *kind, *name;
        const char *const *words;
};

static bool event_said(const void *arg)
{
        const struct event_wait *ew = arg;

        return event_says(ew->kind, ew->name, ew->words);
}

/* The identity Secret deleted before the cluster (as when its namespace is deleted): the
 * deleting MaasMachine and MaasCluster say that the host cannot be released without the
 * Secret, naming it and the system ID, the host stays held in its MAAS, the finalizers stay;
 * the Secret recreated, the release and both deletions finish. */
static void test_identity__secret_gone_during_delete_says_so(void **state)
{
        char *sid, *st, secret[96];
        const char *mm_words[6], *mc_words[5];
        cJSON *o;

        (void)state;
        make_identity_secret("maas-g", SIM_B.proc.url, KEY_B);
        make_ident_cluster("cg", "maas-g");
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "cg", pred_cond_reason, API_UP));
        sid = ready_machine("cg", "g0", &(struct machine_spec){ .bootstrap = true });
        assert_memory_equal(sid, "b-", 2);
        snprintf(secret, sizeof(secret), "Secret %s/maas-g", CL.ns);

        cl_delete(&KUBE_RES_SECRETS, "maas-g");
        until_secret_missing("cg");
        cl_delete(&KUBE_RES_MAASMACHINES, "g0");
        mm_words[0] = secret;
        mm_words[1] = "does not exist";
        mm_words[2] = "cannot release its MAAS machine";
        mm_words[3] = sid;
        mm_words[4] = "recreate the Secret";
        mm_words[5] = NULL;
        cJSON_Delete(cl_wait(&KUBE_RES_MAASMACHINES, "g0", deleting_said, mm_words));
        assert_true(
                cl_eventually(event_said, &(struct event_wait){ "MaasMachine", "g0", mm_words }));
        cl_delete(&KUBE_RES_MAASCLUSTERS, "cg");
        mc_words[0] = secret;
        mc_words[1] = "MaasMachines cannot release their MAAS machines";
        mc_words[2] = "DNS record";
        mc_words[3] = "recreate the Secret";
        mc_words[4] = NULL;
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "cg", deleting_said, mc_words));
        assert_true(
                cl_eventually(event_said, &(struct event_wait){ "MaasCluster", "cg", mc_words }));

        /* nothing was released meanwhile, the finalizers hold */
        st = sim_status(&SIM_B, sid);
        assert_str(st, "Deployed");
        free(st);
        o = cl_get(&KUBE_RES_MAASMACHINES, "g0");
        assert_non_null(o);
        cJSON_Delete(o);

        /* the Secret back: the release and both deletions finish */
        make_identity_secret("maas-g", SIM_B.proc.url, KEY_B);
        assert_null(cl_wait(&KUBE_RES_MAASMACHINES, "g0", NULL, NULL));
        assert_null(cl_wait(&KUBE_RES_MAASCLUSTERS, "cg", NULL, NULL));
        st = sim_status(&SIM_B, sid);
        assert_str(st, "Ready");
        free(st);
        free(sid);
        key_nowhere(KEY_B);
}

static bool has_capacity(const cJSON *o, const void *arg)
{
        const char *cpu = json_at_str(o, "status.capacity.cpu");

        return cpu && strcmp(cpu, arg) == 0;
}

/* status.failureDomains holds exactly the zones of arg ("a,b"), in any order. */
static bool has_zones(const cJSON *o, const void *arg)
{
        const cJSON *fd = json_at(o, "status.failureDomains");
        char *want = xstrdup(arg), *rest = want;
        int n = 0, found = 0;

        for (char *z; (z = next_token(&rest, ',')) != NULL; n++) {
                const cJSON *e;

                cJSON_ArrayForEach (e, fd) {
                        const char *name = cJSON_IsObject(fd) ? e->string : json_at_str(e, "name");

                        found += name && strcmp(name, z) == 0;
                }
        }
        free(want);
        return found == n && cJSON_GetArraySize(fd) == n;
}

static void make_template(const char *name, const char *cluster)
{
        cl_create(&KUBE_RES_MAASMACHINETEMPLATES,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                            "\"MaasMachineTemplate\",\"metadata\":{\"name\":\"%s\",\"labels\":{"
                            "\"cluster.x-k8s.io/cluster-name\":\"%s\"}},\"spec\":{\"template\":"
                            "{\"spec\":{\"image\":\"ubuntu/jammy\",\"minCPU\":1,\"minMemory\":"
                            "1024}}}}",
                            name, cluster));
}

/* A cluster with its own MAAS gets its discovered failure domains and its templates'
 * capacity from that MAAS's inventory, and both follow that inventory's refreshes; a cluster
 * of the default MAAS keeps the default's. */
static void test_identity__zones_and_capacity_from_its_own_maas(void **state)
{
        cJSON *o;

        (void)state;
        start_provider_with_inventories();
        make_identity_secret("maas-b", SIM_B.proc.url, KEY_B);
        make_ident_cluster("cb", "maas-b");
        cl_patch(&KUBE_RES_MAASCLUSTERS, "cb", NULL, "{\"spec\":{\"failureDomains\":null}}");
        make_cluster("cd", true);
        cl_patch(&KUBE_RES_MAASCLUSTERS, "cd", NULL, "{\"spec\":{\"failureDomains\":null}}");
        make_template("tb", "cb");
        make_template("td", "cd");

        /* B's zones and B's smallest machine; A's (the sample inventory: 3 zones, 2 cores) */
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "cb", has_zones, "site-c1,site-c2"));
        o = cl_wait(&KUBE_RES_MAASMACHINETEMPLATES, "tb", has_capacity, "48");
        assert_string_equal(json_at_str(o, "status.capacity.memory"), "64Gi");
        cJSON_Delete(o);
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "cd", has_zones, "az1,az2,az3"));
        cJSON_Delete(cl_wait(&KUBE_RES_MAASMACHINETEMPLATES, "td", has_capacity, "2"));

        /* a smaller machine in B's empty zone: seen at B's next refresh, nothing else moves */
        cJSON_Delete(maassim_call(&SIM_B, "POST", "machines",
                                  "{\"system_id\":\"b-small\",\"hostname\":\"b-small\","
                                  "\"cpu_count\":8,\"memory\":16384,\"zone\":\"site-c3\","
                                  "\"pool\":\"capi\",\"architecture\":\"amd64/generic\"}"));
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "cb", has_zones, "site-c1,site-c2,site-c3"));
        o = cl_wait(&KUBE_RES_MAASMACHINETEMPLATES, "tb", has_capacity, "8");
        assert_string_equal(json_at_str(o, "status.capacity.memory"), "16Gi");
        cJSON_Delete(o);
        o = cl_get(&KUBE_RES_MAASMACHINETEMPLATES, "td");
        assert_string_equal(json_at_str(o, "status.capacity.cpu"), "2");
        cJSON_Delete(o);
        o = cl_get(&KUBE_RES_MAASCLUSTERS, "cd");
        assert_true(has_zones(o, "az1,az2,az3"));
        cJSON_Delete(o);
}

/* SIM_B's view: whether tag exists. */
static bool b_has_tag(const char *tag)
{
        cJSON *st = maassim_call(&SIM_B, "GET", "state", NULL);
        const cJSON *t;
        bool found = false;

        cJSON_ArrayForEach (t, json_at(st, "tags"))
                found = found || strcmp(OR(json_at_str(t, "name"), ""), tag) == 0;
        cJSON_Delete(st);
        return found;
}

static bool b_swept(const void *arg)
{
        (void)arg;
        return !sim_machine_tagged(&SIM_B, "b-big1", "capmaas-reuse-bbbbbbbbbbbb") &&
               !b_has_tag("capmaas-reuse-bbbbbbbbbbbb") && !b_has_tag("capmaas-reuse-dddddddddddd");
}

/* The kept hosts of a cluster with its own MAAS are swept in that MAAS (on its inventory's
 * refreshes, through the cluster's templates), with the hold times recorded there: b-big1,
 * held for two hours of a 30 minute hold, loses its tag and the tag, now empty, goes; the
 * empty tag goes; b-big2, held since now, keeps its tag. MAAS A is not asked about B's tags. */
static void test_identity__kept_hosts_swept_in_its_own_maas(void **state)
{
        (void)state;
        start_provider_with_inventories_hold(30 * 60 * 1000);
        make_identity_secret("maas-b", SIM_B.proc.url, KEY_B);
        make_ident_cluster("cb", "maas-b");
        make_template("tb", "cb");
        assert_true(cl_eventually(b_swept, NULL));
        assert_true(sim_machine_tagged(&SIM_B, "b-big2", "capmaas-reuse-cccccccccccc"));
        assert_true(b_has_tag("capmaas-reuse-cccccccccccc"));
        assert_int_equal(maas_count_requests("capmaas-reuse-"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_identity__each_cluster_uses_its_own_maas,
                                                ident_setup, ident_teardown),
                cmocka_unit_test_setup_teardown(test_identity__rotation_mid_rollout_finishes,
                                                ident_setup_slow, ident_teardown),
                cmocka_unit_test_setup_teardown(test_identity__bad_credentials_are_conditions,
                                                ident_setup, ident_teardown),
                cmocka_unit_test_setup_teardown(test_identity__a_missing_secret_is_read_once,
                                                ident_setup, ident_teardown),
                cmocka_unit_test_setup_teardown(test_identity__secret_gone_during_delete_says_so,
                                                ident_setup, ident_teardown),
                cmocka_unit_test_setup_teardown(test_identity__zones_and_capacity_from_its_own_maas,
                                                ident_setup_zones, ident_teardown),
                cmocka_unit_test_setup_teardown(test_identity__kept_hosts_swept_in_its_own_maas,
                                                ident_setup_kept, ident_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
