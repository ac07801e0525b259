/*
 * ctest: concurrency (the server runs under TSan in CI)
 * The diagnostics server of the capmaas process against kube-sim: /metrics over HTTPS for a
 * bearer token that TokenReview authenticates and SubjectAccessReview allows to get
 * /metrics (401 without or with a bad token, 403 for a user without the rule, 500 when the
 * API server fails), the answers cached (a second scrape makes no review call), plain HTTP
 * refused unless --insecure-diagnostics, no start without a cluster to ask; and the CAPI
 * flags: --feature-gates starts, an unknown flag exits naming it, --tls-cipher-suites limits
 * what the listeners negotiate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "json.h"
#include "kubesim.h"
#include "testutil.h"
#include "xalloc.h"

#define READER "system:serviceaccount:default:prometheus"
#define NOBODY "system:serviceaccount:default:nobody"

struct env {
        struct kubesim ks;
        struct capmaas_proc cm; /* --diagnostics-address 127.0.0.1:0, secure */
        char ks_ca[300];
        char cm_ca[300];
};

static struct env E;

/* POST path with a JSON body on kube-sim as its admin; returns the status, *ret the body. */
static long admin_post(const char *path, const char *body, cJSON **ret)
{
        struct test_http_result res = { 0 };
        char url[512];
        long status;

        (void)snprintf(url, sizeof(url), "%s%s", E.ks.proc.url, path);
        assert_int_equal(test_http_do(&(struct test_http){ .method = "POST",
                                                           .url = url,
                                                           .body = body,
                                                           .content_type = "application/json",
                                                           .ca_file = E.ks_ca,
                                                           .bearer = E.ks.cfg.token },
                                      &res),
                         0);
        status = res.status;
        if (ret)
                assert_int_equal(json_parse(res.body, strlen(res.body), ret), 0);
        test_http_result_release(&res);
        return status;
}

static void create(const char *path, const char *body)
{
        assert_int_equal(admin_post(path, body, NULL), 201);
}

/* A fresh token of ServiceAccount default/name (caller frees). */
static char *sa_token(const char *name)
{
        char path[256];
        cJSON *tr = NULL;
        char *token;

        (void)snprintf(path, sizeof(path), "/api/v1/namespaces/default/serviceaccounts/%s/token",
                       name);
        assert_int_equal(admin_post(path,
                                    "{\"apiVersion\":\"authentication.k8s.io/v1\","
                                    "\"kind\":\"TokenRequest\",\"spec\":{}}",
                                    &tr),
                         201);
        assert_non_null(json_find_str(tr, "status", "token", NULL));
        token = xstrdup(json_find_str(tr, "status", "token", NULL));
        cJSON_Delete(tr);
        return token;
}

/* GET /metrics on the diagnostics port; *ret_body (may be NULL) gets the body. */
static long scrape(const struct capmaas_proc *p, bool tls, const char *token, char **ret_body)
{
        struct test_http_result res = { 0 };
        char *u =
                xasprintf("%s://127.0.0.1:%u/metrics", tls ? "https" : "http", p->diagnostics_port);
        long status;

        (void)test_http_do(
                &(struct test_http){ .url = u, .ca_file = tls ? E.cm_ca : NULL, .bearer = token },
                &res);
        status = res.status;
        if (ret_body)
                *ret_body = xstrdup(res.body ? res.body : "");
        test_http_result_release(&res);
        free(u);
        return status;
}

static int reviews(const char *plural)
{
        return kubesim_count_requests(
                &E.ks, &(struct kubesim_match){ .method = "POST", .path_suffix = plural });
}

static void seed_rbac(void)
{
        create("/api/v1/namespaces/default/serviceaccounts",
               "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\","
               "\"metadata\":{\"name\":\"prometheus\"}}");
        create("/api/v1/namespaces/default/serviceaccounts",
               "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\","
               "\"metadata\":{\"name\":\"nobody\"}}");
        /* as config/prometheus ships it */
        create("/apis/rbac.authorization.k8s.io/v1/clusterroles",
               "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRole\","
               "\"metadata\":{\"name\":\"capmaas-metrics-reader\"},"
               "\"rules\":[{\"nonResourceURLs\":[\"/metrics\"],\"verbs\":[\"get\"]}]}");
        create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
               "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRoleBinding\","
               "\"metadata\":{\"name\":\"prometheus-capmaas-metrics\"},"
               "\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\","
               "\"name\":\"capmaas-metrics-reader\"},"
               "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"prometheus\","
               "\"namespace\":\"default\"}]}");
        /* "nobody" may read Secrets, which says nothing about /metrics */
        create("/apis/rbac.authorization.k8s.io/v1/clusterroles",
               "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRole\","
               "\"metadata\":{\"name\":\"secret-reader\"},"
               "\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"secrets\"],"
               "\"verbs\":[\"get\"]}]}");
        create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
               "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRoleBinding\","
               "\"metadata\":{\"name\":\"nobody-secrets\"},"
               "\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\","
               "\"name\":\"secret-reader\"},"
               "\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"nobody\","
               "\"namespace\":\"default\"}]}");
}

static int group_setup(void **state)
{
        (void)state;
        if (kubesim_start(&E.ks, NULL) < 0)
                return -1;
        (void)snprintf(E.ks_ca, sizeof(E.ks_ca), "%s/ca.crt", E.ks.dir);
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        return kubesim_stop(&E.ks) == 0 ? 0 : -1; /* kube-sim exits 0: no leak, no crash */
}

static void start_secure(void)
{
        const char *const args[] = { "--kubeconfig", E.ks.kubeconfig, "--diagnostics-address",
                                     "127.0.0.1:0", NULL };

        assert_int_equal(capmaas_start(&E.cm, NULL, args, NULL), 0);
        assert_int_not_equal(E.cm.diagnostics_port, 0);
        (void)snprintf(E.cm_ca, sizeof(E.cm_ca), "%s/ca.crt", E.cm.cert_dir);
}

/* ---- the secure endpoint ---- */

static void test_diagnostics__metrics_need_a_token_allowed_to_get_them(void **state)
{
        char *reader, *nobody, *body = NULL;

        (void)state;
        seed_rbac();
        reader = sa_token("prometheus");
        nobody = sa_token("nobody");
        start_secure();
        assert_int_equal(scrape(&E.cm, true, NULL, &body), 401);
        assert_string_equal(body, "Unauthorized\n");
        free(body);
        assert_int_equal(scrape(&E.cm, true, "not-a-token", &body), 401);
        assert_string_equal(body, "Unauthorized\n");
        free(body);
        assert_int_equal(scrape(&E.cm, true, nobody, &body), 403);
        assert_string_equal(body, "Authorization denied for user " NOBODY "\n");
        free(body);
        assert_int_equal(scrape(&E.cm, true, reader, &body), 200);
        assert_non_null(strstr(body, "\ncontroller_runtime_webhook_requests_total{"));
        assert_non_null(strstr(body, "process_resident_memory_bytes"));
        free(body);
        /* the tokens never reach the log */
        body = capmaas_log(&E.cm);
        assert_null(strstr(body, reader));
        assert_null(strstr(body, nobody));
        free(body);
        free(reader);
        free(nobody);
}

static void test_diagnostics__answers_are_cached(void **state)
{
        char *reader = sa_token("prometheus"), *nobody = sa_token("nobody");

        (void)state;
        kubesim_clear_requests(&E.ks);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(scrape(&E.cm, true, reader, NULL), 200);
                assert_int_equal(scrape(&E.cm, true, nobody, NULL), 403);
                assert_int_equal(scrape(&E.cm, true, "bad-token", NULL), 401);
        }
        /* one TokenReview per token, one SubjectAccessReview per authenticated one */
        assert_int_equal(reviews("/tokenreviews"), 3);
        assert_int_equal(reviews("/subjectaccessreviews"), 2);
        free(reader);
        free(nobody);
}

static void test_diagnostics__api_errors_are_500_and_not_cached(void **state)
{
        char *reader = sa_token("prometheus"), *body = NULL;

        (void)state;
        kubesim_faults(&E.ks, "{\"failNext\":{\"method\":\"POST\","
                              "\"pathContains\":\"/subjectaccessreviews\",\"count\":1}}");
        assert_int_equal(scrape(&E.cm, true, reader, &body), 500);
        assert_string_equal(body, "Authorization failed\n");
        free(body);
        kubesim_clear_requests(&E.ks);
        assert_int_equal(scrape(&E.cm, true, reader, NULL), 200);
        assert_int_equal(reviews("/tokenreviews"), 1);
        assert_int_equal(reviews("/subjectaccessreviews"), 1);
        free(reader);
}

static void test_diagnostics__a_deleted_service_account_loses_access(void **state)
{
        char *token;

        (void)state;
        create("/api/v1/namespaces/default/serviceaccounts",
               "{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":\"gone\"}"
               "}");
        token = sa_token("gone");
        assert_int_equal(test_sh("curl -sf --cacert '%s' -X DELETE -H 'Authorization: Bearer %s' "
                                 "%s/api/v1/namespaces/default/serviceaccounts/gone >/dev/null",
                                 E.ks_ca, E.ks.cfg.token, E.ks.proc.url),
                         0);
        assert_int_equal(scrape(&E.cm, true, token, NULL), 401);
        free(token);
}

static void test_diagnostics__plain_http_is_refused_on_the_secure_port(void **state)
{
        char *reader = sa_token("prometheus"), *body = NULL;

        (void)state;
        assert_int_not_equal(scrape(&E.cm, false, reader, &body), 200);
        assert_null(strstr(body, "process_resident_memory_bytes"));
        free(body);
        free(reader);
        assert_int_equal(capmaas_stop(&E.cm, 10000), 0);
}

/* ---- insecure, and without a cluster ---- */

static void test_diagnostics__insecure_diagnostics_is_plain_http_without_auth(void **state)
{
        const char *const args[] = { "--diagnostics-address", "127.0.0.1:0",
                                     "--insecure-diagnostics", NULL };
        struct capmaas_proc p;
        char *body = NULL;

        (void)state;
        kubesim_clear_requests(&E.ks);
        assert_int_equal(capmaas_start(&p, NULL, args, NULL), 0);
        assert_int_equal(scrape(&p, false, NULL, &body), 200);
        assert_non_null(strstr(body, "process_resident_memory_bytes"));
        free(body);
        assert_int_not_equal(scrape(&p, true, NULL, NULL), 200);
        assert_int_equal(capmaas_stop(&p, 10000), 0);
        assert_int_equal(reviews("reviews"), 0);
}

static void test_diagnostics__secure_diagnostics_need_a_cluster(void **state)
{
        (void)state;
        assert_int_equal(test_sh("env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST %s --webhooks-only "
                                 "--webhook-port 0 --health-addr 0 --diagnostics-address "
                                 "127.0.0.1:0 --webhook-cert-dir %s 2>&1 | grep -q "
                                 "'needs the Kubernetes API.*use --insecure-diagnostics or "
                                 "--diagnostics-address=0'",
                                 test_env("CAPMAAS_BIN"), test_env("CAPMAAS_TEST_CERTS")),
                         0);
}

/* ---- the CAPI flags ---- */

static void test_diagnostics__feature_gates_start_and_unknown_flags_do_not(void **state)
{
        const char *const args[] = { "--feature-gates=MachinePool=true,ClusterTopology=true",
                                     "--diagnostics-address=0", NULL };
        struct capmaas_proc p;
        char *log;

        (void)state;
        assert_int_equal(capmaas_start(&p, NULL, args, NULL), 0);
        log = capmaas_log(&p);
        assert_non_null(strstr(log, "MachinePool=true,ClusterTopology=true"));
        free(log);
        assert_int_equal(capmaas_stop(&p, 10000), 0);
        assert_int_equal(test_sh("%s --no-such-flag 2>&1 | grep -qx 'capmaas: unknown flag "
                                 "--no-such-flag'",
                                 test_env("CAPMAAS_BIN")),
                         0);
        assert_int_equal(test_sh("%s --no-such-flag 2>/dev/null", test_env("CAPMAAS_BIN")), 2);
        assert_int_equal(test_sh("%s --feature-gates=Bogus=true 2>&1 | grep -q 'unrecognized "
                                 "feature gate: Bogus'",
                                 test_env("CAPMAAS_BIN")),
                         0);
}

static void test_diagnostics__cipher_suites_limit_the_webhook_listener(void **state)
{
        const char *const args[] = { "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                                     "--diagnostics-address=0", NULL };
        struct capmaas_proc p;
        struct tls_conn c;
        char ca[300];

        (void)state;
        assert_int_equal(capmaas_start(&p, NULL, args, NULL), 0);
        (void)snprintf(ca, sizeof(ca), "%s/ca.crt", p.cert_dir);
        assert_int_equal(tls_conn_open(&c, p.webhook_port,
                                       "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM",
                                       ca),
                         0);
        tls_conn_close(&c);
        assert_true(tls_conn_open(&c, p.webhook_port,
                                  "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:"
                                  "+CHACHA20-POLY1305",
                                  ca) < 0);
        assert_true(tls_conn_open(&c, p.webhook_port,
                                  "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM",
                                  ca) < 0);
        assert_int_equal(tls_conn_open(&c, p.webhook_port,
                                       "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-256-GCM",
                                       ca),
                         0);
        tls_conn_close(&c);
        assert_int_equal(capmaas_stop(&p, 10000), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_diagnostics__metrics_need_a_token_allowed_to_get_them),
                cmocka_unit_test(test_diagnostics__answers_are_cached),
                cmocka_unit_test(test_diagnostics__api_errors_are_500_and_not_cached),
                cmocka_unit_test(test_diagnostics__a_deleted_service_account_loses_access),
                cmocka_unit_test(test_diagnostics__plain_http_is_refused_on_the_secure_port),
                cmocka_unit_test(test_diagnostics__insecure_diagnostics_is_plain_http_without_auth),
                cmocka_unit_test(test_diagnostics__secure_diagnostics_need_a_cluster),
                cmocka_unit_test(test_diagnostics__feature_gates_start_and_unknown_flags_do_not),
                cmocka_unit_test(test_diagnostics__cipher_suites_limit_the_webhook_listener),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
