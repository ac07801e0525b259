/*
 * Unit: kubeconfig and in-cluster configuration loading (reconcile/kube_config.c). Each test
 * writes its files into a fresh temporary directory. No network.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base64.h"
#include "err.h"
#include "kube_client.h"
#include "testutil.h"
#include "xalloc.h"

struct fx {
        char dir[256];
        struct kube_config cfg;
        char *err;
};

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));

        test_mkdtemp(f->dir, sizeof(f->dir));
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        kube_config_release(&f->cfg);
        free(f->err);
        (void)test_sh("rm -rf '%s'", f->dir);
        free(f);
        return 0;
}

static char *put(const struct fx *f, const char *name, const char *text)
{
        char *path = xasprintf("%s/%s", f->dir, name);
        FILE *fp = fopen(path, "w");

        assert_non_null(fp);
        fputs(text, fp);
        assert_int_equal(fclose(fp), 0);
        return path;
}

static char *slurp(const char *path)
{
        FILE *fp = fopen(path, "r");
        char buf[4096];
        size_t n;

        assert_non_null(fp);
        n = fread(buf, 1, sizeof(buf) - 1, fp);
        fclose(fp);
        buf[n] = '\0';
        return xstrdup(buf);
}

static const char two_contexts[] = "apiVersion: v1\n"
                                   "kind: Config\n"
                                   "current-context: dev\n"
                                   "clusters:\n"
                                   "- name: c1\n"
                                   "  cluster:\n"
                                   "    server: https://10.0.0.1:6443/\n"
                                   "    certificate-authority: certs/ca.pem\n"
                                   "- name: c2\n"
                                   "  cluster:\n"
                                   "    server: https://prod.example:443\n"
                                   "    insecure-skip-tls-verify: true\n"
                                   "contexts:\n"
                                   "- name: dev\n"
                                   "  context: {cluster: c1, user: u1, namespace: team-a}\n"
                                   "- name: prod\n"
                                   "  context:\n"
                                   "    cluster: c2\n"
                                   "    user: u2\n"
                                   "users:\n"
                                   "- name: u1\n"
                                   "  user:\n"
                                   "    token: abc123\n"
                                   "    client-certificate: /abs/client.crt\n"
                                   "    client-key: keys/client.key\n"
                                   "- name: u2\n"
                                   "  user:\n"
                                   "    tokenFile: tok\n";

static void test_kubeconfig__current_context_with_file_paths_and_token(void **state)
{
        struct fx *f = *state;
        char *path = put(f, "config", two_contexts);
        char *want;

        assert_int_equal(kube_config_from_kubeconfig(path, NULL, &f->cfg, &f->err), 0);
        assert_string_equal(f->cfg.server, "https://10.0.0.1:6443"); /* slash dropped */
        want = xasprintf("%s/certs/ca.pem", f->dir);                 /* relative → its dir */
        assert_string_equal(f->cfg.ca_file, want);
        free(want);
        assert_string_equal(f->cfg.client_cert_file, "/abs/client.crt");
        want = xasprintf("%s/keys/client.key", f->dir);
        assert_string_equal(f->cfg.client_key_file, want);
        free(want);
        assert_string_equal(f->cfg.token, "abc123");
        assert_null(f->cfg.token_file);
        assert_string_equal(f->cfg.namespace, "team-a");
        assert_false(f->cfg.insecure_skip_verify);
        assert_int_equal(f->cfg.n_data, 0);
        free(path);
}

static void test_kubeconfig__named_context_insecure_and_token_file(void **state)
{
        struct fx *f = *state;
        char *path = put(f, "config", two_contexts);
        char *want = xasprintf("%s/tok", f->dir);

        assert_int_equal(kube_config_from_kubeconfig(path, "prod", &f->cfg, &f->err), 0);
        assert_string_equal(f->cfg.server, "https://prod.example:443");
        assert_true(f->cfg.insecure_skip_verify);
        assert_null(f->cfg.ca_file);
        assert_null(f->cfg.token);
        assert_string_equal(f->cfg.token_file, want);
        assert_string_equal(f->cfg.namespace, "default");
        free(want);
        free(path);
}

static void test_kubeconfig__data_fields_stay_in_memory(void **state)
{
        struct fx *f = *state;
        char *ca = base64_encode("CA PEM\n", 7), *crt = base64_encode("CERT\n", 5);
        char *key = base64_encode("KEY\n", 4);
        char *text = xasprintf("current-context: x\n"
                               "clusters: [{name: c, cluster: {server: 'https://h:1', "
                               "certificate-authority-data: %s}}]\n"
                               "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                               "users: [{name: u, user: {client-certificate-data: %s, "
                               "client-key-data: %s}}]\n",
                               ca, crt, key);
        char *path = put(f, "config", text), *got, *key_path;
        char tmpdir[256];
        struct stat st;

        /* an empty TMPDIR stays empty: nothing of the kubeconfig reaches a disk */
        test_mkdtemp(tmpdir, sizeof(tmpdir));
        assert_int_equal(setenv("TMPDIR", tmpdir, 1), 0);
        assert_int_equal(kube_config_from_kubeconfig(path, NULL, &f->cfg, &f->err), 0);
        assert_int_equal(unsetenv("TMPDIR"), 0);
        assert_int_equal(test_sh("test -z \"$(ls -A '%s')\" && rmdir '%s'", tmpdir, tmpdir), 0);
        assert_int_equal(f->cfg.n_data, 3);
        assert_memory_equal(f->cfg.ca_file, "/proc/self/fd/", 14);
        got = slurp(f->cfg.ca_file);
        assert_string_equal(got, "CA PEM\n");
        free(got);
        got = slurp(f->cfg.client_cert_file);
        assert_string_equal(got, "CERT\n");
        free(got);
        got = slurp(f->cfg.client_key_file);
        assert_string_equal(got, "KEY\n");
        free(got);
        /* sealed: whoever opens the path reads what was decoded, and cannot change it */
        assert_int_equal(stat(f->cfg.client_key_file, &st), 0);
        assert_int_equal(st.st_size, 4);
        assert_int_equal(open(f->cfg.client_key_file, O_WRONLY | O_TRUNC), -1);
        key_path = xstrdup(f->cfg.client_key_file);
        kube_config_release(&f->cfg);
        assert_int_not_equal(access(key_path, F_OK), 0); /* closed with the config */
        assert_null(f->cfg.server);
        assert_int_equal(f->cfg.n_data, 0);
        free(key_path);
        free(ca);
        free(crt);
        free(key);
        free(text);
        free(path);
}

static void test_kubeconfig__malformed_yaml_is_a_parse_error_with_position(void **state)
{
        struct fx *f = *state;
        char *path = put(f, "config", "clusters:\n  - name: [unclosed\n  bad: : :\n");

        assert_int_equal(kube_config_from_kubeconfig(path, NULL, &f->cfg, &f->err), CM_EPARSE);
        assert_non_null(f->err);
        assert_non_null(strstr(f->err, "line"));
        assert_non_null(strstr(f->err, path));
        assert_null(f->cfg.server); /* ret untouched */
        free(path);
}

static void test_kubeconfig__semantic_errors_have_messages(void **state)
{
        static const struct {
                const char *yaml;
                const char *context;
                int err;
                const char *msg;
        } cases[] = {
                { "- a\n- b\n", NULL, CM_EPARSE, "mapping" },
                { "clusters: []\n", NULL, CM_EINVAL, "current-context" },
                { "current-context: nope\ncontexts: []\n", NULL, CM_EINVAL, "\"nope\"" },
                { "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n", NULL,
                  CM_EINVAL, "no server" },
                { "contexts: [{name: x, context: {cluster: c}}]\n"
                  "clusters: [{name: c, cluster: {server: '//'}}]\n",
                  "x", CM_EINVAL, "no server" }, /* slashes alone name no server (fuzzer) */
                { "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                  "clusters: [{name: c, cluster: {server: 'https://h'}}]\n"
                  "users: [{name: u, user: {client-certificate: a.crt}}]\n",
                  "x", CM_EINVAL, "together" },
                { "contexts: [{name: x, context: {cluster: c}}]\n"
                  "clusters: [{name: c, cluster: {server: 'https://h', "
                  "certificate-authority-data: '@@@'}}]\n",
                  "x", CM_EPARSE, "base64" },
        };

        char *path;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct fx *f = *state;

                path = put(f, "config", cases[i].yaml);
                assert_int_equal(
                        kube_config_from_kubeconfig(path, cases[i].context, &f->cfg, &f->err),
                        cases[i].err);
                assert_non_null(strstr(f->err, cases[i].msg));
                free(f->err);
                f->err = NULL;
                free(path);
        }
}

static void test_kubeconfig__missing_file_is_an_error(void **state)
{
        struct fx *f = *state;
        char *path = xasprintf("%s/absent", f->dir);

        assert_int_equal(kube_config_from_kubeconfig(path, NULL, &f->cfg, &f->err), CM_ENOTFOUND);
        assert_non_null(strstr(f->err, "absent"));
        free(path);
}

static void test_in_cluster__service_account_directory(void **state)
{
        struct fx *f = *state;
        char h[] = "KUBERNETES_SERVICE_HOST=10.96.0.1", p[] = "KUBERNETES_SERVICE_PORT=443";
        char *envp[] = { h, p, NULL };
        char *tok = put(f, "token", "sa-token\n"), *ca = put(f, "ca.crt", "PEM");
        char *ns = put(f, "namespace", "capmaas-system\n");

        assert_int_equal(kube_config_in_cluster(f->dir, envp, &f->cfg, &f->err), 0);
        assert_string_equal(f->cfg.server, "https://10.96.0.1:443");
        assert_string_equal(f->cfg.token_file, tok);
        assert_null(f->cfg.token); /* read by clients, so rotation is seen */
        assert_string_equal(f->cfg.ca_file, ca);
        assert_string_equal(f->cfg.namespace, "capmaas-system");
        free(tok);
        free(ca);
        free(ns);
}

static void test_in_cluster__ipv6_host_and_default_namespace(void **state)
{
        struct fx *f = *state;
        char h[] = "KUBERNETES_SERVICE_HOST=fd00::1", p[] = "KUBERNETES_SERVICE_PORT=6443";
        char *envp[] = { h, p, NULL };
        char *tok = put(f, "token", "t");

        assert_int_equal(kube_config_in_cluster(f->dir, envp, &f->cfg, &f->err), 0);
        assert_string_equal(f->cfg.server, "https://[fd00::1]:6443");
        assert_string_equal(f->cfg.namespace, "default");
        assert_null(f->cfg.ca_file);
        free(tok);
}

static void test_in_cluster__needs_env_and_token(void **state)
{
        struct fx *f = *state;
        char home[] = "HOME=/root", h[] = "KUBERNETES_SERVICE_HOST=h";
        char p[] = "KUBERNETES_SERVICE_PORT=1";
        char *no_env[] = { home, NULL };
        char *envp[] = { h, p, NULL };

        assert_int_equal(kube_config_in_cluster(f->dir, no_env, &f->cfg, &f->err), CM_EINVAL);
        assert_non_null(strstr(f->err, "KUBERNETES_SERVICE_HOST"));
        free(f->err);
        f->err = NULL;
        assert_int_equal(kube_config_in_cluster(f->dir, envp, &f->cfg, &f->err), CM_EIO);
        assert_non_null(strstr(f->err, "token"));
}

static void test_load__flag_then_env_then_in_cluster(void **state)
{
        struct fx *f = *state;
        char *a = put(f, "a",
                      "current-context: x\ncontexts: [{name: x, context: "
                      "{cluster: c}}]\nclusters: [{name: c, cluster: {server: "
                      "'https://a'}}]\n");
        char *b = put(f, "b",
                      "current-context: x\ncontexts: [{name: x, context: "
                      "{cluster: c}}]\nclusters: [{name: c, cluster: {server: "
                      "'https://b'}}]\n");
        char *kc = xasprintf("KUBECONFIG=%s:/nonexistent", b);
        char *envp[] = { kc, NULL };
        char *none[] = { NULL };

        assert_int_equal(kube_config_load(a, envp, &f->cfg, &f->err), 0);
        assert_string_equal(f->cfg.server, "https://a");
        kube_config_release(&f->cfg);
        assert_int_equal(kube_config_load(NULL, envp, &f->cfg, &f->err), 0);
        assert_string_equal(f->cfg.server, "https://b");
        kube_config_release(&f->cfg);
        assert_int_equal(kube_config_load(NULL, none, &f->cfg, &f->err), CM_EINVAL);
        assert_non_null(strstr(f->err, "not in a cluster"));
        free(a);
        free(b);
        free(kc);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_kubeconfig__current_context_with_file_paths_and_token, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_kubeconfig__named_context_insecure_and_token_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kubeconfig__data_fields_stay_in_memory, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_kubeconfig__malformed_yaml_is_a_parse_error_with_position, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(test_kubeconfig__semantic_errors_have_messages,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_kubeconfig__missing_file_is_an_error, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_in_cluster__service_account_directory, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_in_cluster__ipv6_host_and_default_namespace,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_in_cluster__needs_env_and_token, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_load__flag_then_env_then_in_cluster, setup,
                                                teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
