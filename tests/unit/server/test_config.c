/*
 * Unit tests for config: defaults, each source, precedence, every error message of the
 * flags and the environment, flag syntax and the MAAS variables. The API key file, the
 * YAML file's errors, --help and the sample file are in test_config_files.c.
 */
#include <ctype.h>
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "config_fixture.h"
#include "err.h"
#include "xalloc.h"

/* ---- every option with a non-default value, for flags, environment and file ---- */

static void check_all_set(const struct config *c)
{
        assert_string_equal(c->kubeconfig, "/etc/kube/config");
        assert_true(c->webhooks_only);
        assert_string_equal(c->namespace, "team-a");
        assert_string_equal(c->watch_filter, "prod");
        assert_true(c->kube_api_qps == 50.5);
        assert_int_equal(c->kube_api_burst, 100);
        assert_int_equal(c->sync_period_ms, 3600000);
        assert_true(c->leader_elect);
        assert_string_equal(c->leader_election_id, "my-lock");
        assert_string_equal(c->leader_election_namespace, "kube-system");
        assert_int_equal(c->leader_elect_lease_duration_ms, 30000);
        assert_int_equal(c->leader_elect_renew_deadline_ms, 20000);
        assert_int_equal(c->leader_elect_retry_period_ms, 5000);
        assert_int_equal(c->machine_concurrency, 8);
        assert_int_equal(c->cluster_concurrency, 4);
        assert_int_equal(c->deploy_timeout_ms, 45 * 60000);
        assert_int_equal(c->release_erase, RELEASE_ERASE_QUICK);
        assert_string_equal(c->webhook_host, "127.0.0.1");
        assert_int_equal(c->webhook_port, 10443);
        assert_string_equal(c->webhook_cert_dir, "/certs");
        assert_string_equal(c->webhook_cert_name, "server.crt");
        assert_string_equal(c->webhook_key_name, "server.key");
        assert_int_equal(c->tls_min_version, TLS_VERSION_13);
        assert_int_equal(c->webhook_threads, 8);
        assert_int_equal(c->webhook_max_connections, 64);
        assert_int_equal(c->webhook_connection_memory_limit, 128 * 1024);
        assert_int_equal(c->webhook_max_body_bytes, 2 * 1024 * 1024);
        assert_int_equal(c->webhook_read_timeout_s, 30);
        assert_int_equal(c->graceful_shutdown_timeout_ms, 60000);
        assert_string_equal(c->metrics_bind_addr, "127.0.0.1:18080");
        assert_string_equal(c->health_addr, "0");
        assert_int_equal(c->verbosity, 3);
        assert_int_equal(c->logging_format, LOG_FORMAT_TEXT);
        assert_string_equal(c->maas_endpoint, "http://maas.example:5240/MAAS");
        assert_string_equal(c->maas_api_key, "ck:tk:ts");
        assert_string_equal(c->maas_ca_file, "/etc/maas/ca.crt");
        assert_true(c->maas_insecure_skip_verify);
        assert_int_equal(c->maas_timeout_ms, 45000);
        assert_int_equal(c->maas_inventory_interval_ms, 120000);
        assert_false(c->admission_maas_checks);
}

enum source {
        FROM_FLAG,
        FROM_ENV,
        FROM_FILE,
};

static void load_all_from(enum source src)
{
        char *key_path = config_test_write_file("all.key", "ck:tk:ts\n");
        char **words = xcalloc(config_test_opts_n + 1, sizeof(*words));
        char *yaml = xstrdup(""), *tmp, *yaml_path = NULL, *flag = NULL;
        const char *file_args[2] = { NULL, NULL };
        const char *const *args = NONE, *const *env = NONE;
        struct config *c;

        for (size_t i = 0; i < config_test_opts_n; i++) {
                const char *v = config_test_opts[i].value ? config_test_opts[i].value : key_path;
                char *upper = config_test_env_name(config_test_opts[i].name);

                if (src == FROM_FLAG)
                        words[i] = xasprintf("--%s=%s", config_test_opts[i].name, v);
                else if (src == FROM_ENV)
                        words[i] = xasprintf("%s=%s", upper, v);
                tmp = xasprintf("%s%s: \"%s\"\n", yaml, config_test_opts[i].name, v);
                free(yaml);
                yaml = tmp;
                free(upper);
        }
        if (src == FROM_FILE) {
                yaml_path = config_test_write_file("all.yaml", yaml);
                flag = xasprintf("--config=%s", yaml_path);
                file_args[0] = flag;
                args = file_args;
        } else if (src == FROM_FLAG) {
                args = (const char *const *)words;
        } else {
                env = (const char *const *)words;
        }
        c = config_test_load_ok(args, env);
        check_all_set(c);
        config_free(c);
        for (size_t i = 0; i < config_test_opts_n; i++)
                free(words[i]);
        free(words);
        free(flag);
        free(yaml_path);
        free(yaml);
        free(key_path);
}

/* ---- defaults and sources ---- */

static void test_config__defaults_match_the_documented_values(void **state)
{
        struct config *c = config_test_load_ok(NONE, NONE);

        (void)state;
        assert_false(c->help);
        assert_false(c->version);
        assert_null(c->config_file);
        assert_null(c->kubeconfig);
        assert_false(c->webhooks_only);
        assert_string_equal(c->namespace, "");
        assert_string_equal(c->watch_filter, "");
        assert_true(c->kube_api_qps == 20.0);
        assert_int_equal(c->kube_api_burst, 30);
        assert_int_equal(c->sync_period_ms, 120 * 60000);
        assert_false(c->leader_elect);
        assert_string_equal(c->leader_election_id, "controller-leader-election-capmaas");
        assert_string_equal(c->leader_election_namespace, "capmaas-system");
        assert_int_equal(c->leader_elect_lease_duration_ms, 15000);
        assert_int_equal(c->leader_elect_renew_deadline_ms, 10000);
        assert_int_equal(c->leader_elect_retry_period_ms, 2000);
        assert_int_equal(c->machine_concurrency, 2);
        assert_int_equal(c->cluster_concurrency, 2);
        assert_int_equal(c->deploy_timeout_ms, 30 * 60000);
        assert_int_equal(c->release_erase, RELEASE_ERASE_NONE);
        assert_string_equal(c->webhook_host, "");
        assert_int_equal(c->webhook_port, 9443);
        assert_string_equal(c->webhook_cert_dir, "/tmp/k8s-webhook-server/serving-certs");
        assert_string_equal(c->webhook_cert_name, "tls.crt");
        assert_string_equal(c->webhook_key_name, "tls.key");
        assert_int_equal(c->tls_min_version, TLS_VERSION_12);
        assert_int_equal(c->webhook_threads, 0);
        assert_int_equal(c->webhook_max_connections, 1024);
        assert_int_equal(c->webhook_connection_memory_limit, 16 * 1024);
        assert_int_equal(c->webhook_max_body_bytes, 8 * 1024 * 1024);
        assert_int_equal(c->webhook_read_timeout_s, 10);
        assert_int_equal(c->graceful_shutdown_timeout_ms, 30000);
        assert_string_equal(c->metrics_bind_addr, ":8080");
        assert_string_equal(c->health_addr, ":9440");
        assert_int_equal(c->verbosity, 0);
        assert_int_equal(c->logging_format, LOG_FORMAT_JSON);
        assert_null(c->maas_endpoint);
        assert_null(c->maas_api_key);
        assert_null(c->maas_ca_file);
        assert_false(c->maas_insecure_skip_verify);
        assert_int_equal(c->maas_timeout_ms, 30000);
        assert_int_equal(c->maas_inventory_interval_ms, 60000);
        assert_true(c->admission_maas_checks);
        config_free(c);
}

static void test_config__every_option_settable_by_flag(void **state)
{
        (void)state;
        load_all_from(FROM_FLAG);
}

static void test_config__every_option_settable_by_env(void **state)
{
        (void)state;
        load_all_from(FROM_ENV);
}

static void test_config__every_option_settable_by_file(void **state)
{
        (void)state;
        load_all_from(FROM_FILE);
}

static void test_config__plain_yaml_scalars_are_accepted(void **state)
{
        char *path =
                config_test_write_file("plain.yaml", "# comment\n"
                                                     "webhook-port: 10443\n"
                                                     "leader-elect: true\n"
                                                     "health-addr: 127.0.0.1:9999\n"
                                                     "maas-endpoint: http://10.0.0.2:5240/MAAS\n"
                                                     "kube-api-qps: 7.5\n"
                                                     "namespace: ''\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c = config_test_load_ok(ARGS(flag), NONE);

        (void)state;
        assert_int_equal(c->webhook_port, 10443);
        assert_true(c->leader_elect);
        assert_string_equal(c->health_addr, "127.0.0.1:9999");
        assert_string_equal(c->maas_endpoint, "http://10.0.0.2:5240/MAAS");
        assert_true(c->kube_api_qps == 7.5);
        assert_string_equal(c->namespace, "");
        assert_string_equal(c->config_file, path);
        config_free(c);
        free(flag);
        free(path);
}

static void test_config__config_file_from_env(void **state)
{
        char *path = config_test_write_file("envcfg.yaml", "webhook-port: 1234\n");
        char *var = xasprintf("CAPMAAS_CONFIG=%s", path);
        struct config *c = config_test_load_ok(NONE, ARGS(var));

        (void)state;
        assert_int_equal(c->webhook_port, 1234);
        assert_string_equal(c->config_file, path);
        config_free(c);
        free(var);
        free(path);
}

static void test_config__config_flag_beats_config_env(void **state)
{
        char *a = config_test_write_file("a.yaml", "webhook-port: 1111\n");
        char *b = config_test_write_file("b.yaml", "webhook-port: 2222\n");
        char *flag = xasprintf("--config=%s", a);
        char *var = xasprintf("CAPMAAS_CONFIG=%s", b);
        struct config *c = config_test_load_ok(ARGS(flag), ARGS(var));

        (void)state;
        assert_int_equal(c->webhook_port, 1111);
        config_free(c);
        free(var);
        free(flag);
        free(b);
        free(a);
}

static void test_config__empty_file_keeps_defaults(void **state)
{
        char *path = config_test_write_file("empty.yaml", "# nothing set here\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c = config_test_load_ok(ARGS(flag), NONE);

        (void)state;
        assert_int_equal(c->webhook_port, 9443);
        config_free(c);
        free(flag);
        free(path);
}

/* ---- precedence ---- */

struct prec_case {
        const char *name;
        const char *values[3]; /* given by flag, env, file */
        const char *seen[4];   /* what get() shows for flag, env, file, default */
        char *(*get)(const struct config *c);
};

static char *get_port(const struct config *c)
{
        return xasprintf("%u", c->webhook_port);
}

static char *get_namespace(const struct config *c)
{
        return xstrdup(c->namespace);
}

static char *get_sync(const struct config *c)
{
        return xasprintf("%llu", (unsigned long long)c->sync_period_ms);
}

static const struct prec_case prec_cases[] = {
        { "webhook-port",
          { "1111", "2222", "3333" },
          { "1111", "2222", "3333", "9443" },
          get_port },
        { "namespace",
          { "flag-ns", "env-ns", "file-ns" },
          { "flag-ns", "env-ns", "file-ns", "" },
          get_namespace },
        { "sync-period",
          { "1s", "2m", "3h" },
          { "1000", "120000", "10800000", "7200000" },
          get_sync },
};

/* The strongest source present in mask (bit 0 flag, 1 env, 2 file) decides. */
static const char *prec_expected(const struct prec_case *pc, unsigned mask)
{
        for (int i = 0; i < 3; i++)
                if (mask & (1u << i))
                        return pc->seen[i];
        return pc->seen[3];
}

static void precedence_one(const struct prec_case *pc, unsigned mask)
{
        char *env_var = config_test_env_name(pc->name);
        char *flag = xasprintf("--%s=%s", pc->name, pc->values[0]);
        char *env = xasprintf("%s=%s", env_var, pc->values[1]);
        char *yaml = xasprintf("%s: %s\n", pc->name, pc->values[2]);
        char *path = config_test_write_file("prec.yaml", yaml);
        char *cfg = xasprintf("--config=%s", path);
        char *got;
        const char *const *args = (mask & 1) ? ARGS(cfg, flag) : ARGS(cfg);
        const char *const *envp = (mask & 2) ? ARGS(env) : NONE;
        struct config *c;

        if (!(mask & 4)) {
                free(path);
                path = config_test_write_file("prec.yaml", "# nothing\n");
        }
        c = config_test_load_ok(args, envp);
        got = pc->get(c);
        assert_string_equal(got, prec_expected(pc, mask));
        free(got);
        config_free(c);
        free(cfg);
        free(path);
        free(yaml);
        free(env);
        free(flag);
        free(env_var);
}

static void test_config__precedence_flag_env_file_default_all_combinations(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(prec_cases) / sizeof(prec_cases[0]); i++)
                for (unsigned mask = 0; mask < 8; mask++)
                        precedence_one(&prec_cases[i], mask);
}

static void test_config__last_flag_wins(void **state)
{
        struct config *c =
                config_test_load_ok(ARGS("--webhook-port=1", "--webhook-port", "2"), NONE);

        (void)state;
        assert_int_equal(c->webhook_port, 2);
        config_free(c);
}

/* ---- flag syntax ---- */

static void test_config__boolean_flag_forms(void **state)
{
        struct config *c;

        (void)state;
        c = config_test_load_ok(ARGS("--leader-elect"), NONE);
        assert_true(c->leader_elect);
        config_free(c);
        c = config_test_load_ok(ARGS("--leader-elect=false"), ARGS("CAPMAAS_LEADER_ELECT=true"));
        assert_false(c->leader_elect);
        config_free(c);
        c = config_test_load_ok(ARGS("-leader-elect=1", "--admission-maas-checks=F"), NONE);
        assert_true(c->leader_elect);
        assert_false(c->admission_maas_checks);
        config_free(c);
        /* a boolean never takes the next word */
        c = config_test_load_ok(ARGS("--leader-elect", "--webhook-port", "1234"), NONE);
        assert_true(c->leader_elect);
        assert_int_equal(c->webhook_port, 1234);
        config_free(c);
        config_test_expect_error(ARGS("--leader-elect", "false"), NONE, CM_EINVAL,
                                 "unexpected argument \"false\"");
}

static void test_config__value_flag_forms(void **state)
{
        struct config *c;

        (void)state;
        c = config_test_load_ok(
                ARGS("--namespace", "ns1", "-webhook-port", "9000", "--watch-filter=a.b"), NONE);
        assert_string_equal(c->namespace, "ns1");
        assert_int_equal(c->webhook_port, 9000);
        assert_string_equal(c->watch_filter, "a.b");
        config_free(c);
        config_test_expect_error(
                ARGS("--watch-filter=a=b"), NONE, CM_EINVAL,
                "--watch-filter: invalid value \"a=b\": expected a label value (letters, "
                "digits, '-', '_' and '.', at most 63 characters), or empty");
}

static void test_config__verbosity_forms(void **state)
{
        static const char *const forms[][2] = {
                { "-v", "2" }, { "-v=2", NULL }, { "--v=2", NULL }, { "--v", "2" }
        };
        struct config *c;

        (void)state;
        for (size_t i = 0; i < 4; i++) {
                c = forms[i][1] ? config_test_load_ok(ARGS(forms[i][0], forms[i][1]), NONE)
                                : config_test_load_ok(ARGS(forms[i][0]), NONE);
                assert_int_equal(c->verbosity, 2);
                config_free(c);
        }
        c = config_test_load_ok(NONE, ARGS("CAPMAAS_V=4"));
        assert_int_equal(c->verbosity, 4);
        config_free(c);
        config_test_expect_error(ARGS("-v"), NONE, CM_EINVAL, "-v: missing value");
        config_test_expect_error(ARGS("-v=11"), NONE, CM_EINVAL,
                                 "-v: invalid value \"11\": expected an integer between 0 and 10");
        config_test_expect_error(ARGS("-v=-1"), NONE, CM_EINVAL,
                                 "-v: invalid value \"-1\": expected an integer between 0 and 10");
        config_test_expect_error(ARGS("-v2"), NONE, CM_EINVAL, "unknown flag -v2");
}

static void test_config__help_and_version_flags(void **state)
{
        char *path = config_test_write_file("broken.yaml", "webhok-port: 1\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c;

        (void)state;
        c = config_test_load_ok(ARGS("-h"), NONE);
        assert_true(c->help);
        config_free(c);
        c = config_test_load_ok(ARGS("--help"), NONE);
        assert_true(c->help);
        config_free(c);
        c = config_test_load_ok(ARGS("--version"), NONE);
        assert_true(c->version);
        assert_false(c->help);
        config_free(c);
        /* --help works even when the file or the environment is broken */
        c = config_test_load_ok(ARGS(flag, "--help"),
                                ARGS("CAPMAAS_WEBHOOK_PORT=x", "POD_NAMESPACE=B_d"));
        assert_true(c->help);
        config_free(c);
        config_test_expect_error(
                NONE, ARGS("CAPMAAS_HELP=true", "CAPMAAS_WEBHOOK_PORT=x"), CM_EINVAL,
                "$CAPMAAS_WEBHOOK_PORT: invalid value \"x\": expected an integer between "
                "0 and 65535");
        free(flag);
        free(path);
}

/* ---- flag errors ---- */

static void test_config__flag_errors_name_the_flag(void **state)
{
        (void)state;
        config_test_expect_error(ARGS("--foo"), NONE, CM_EINVAL, "unknown flag --foo");
        config_test_expect_error(ARGS("--foo=1"), NONE, CM_EINVAL, "unknown flag --foo");
        config_test_expect_error(ARGS("-x"), NONE, CM_EINVAL, "unknown flag -x");
        config_test_expect_error(ARGS("---webhook-port=1"), NONE, CM_EINVAL,
                                 "unknown flag ---webhook-port");
        config_test_expect_error(ARGS("extra"), NONE, CM_EINVAL, "unexpected argument \"extra\"");
        config_test_expect_error(ARGS("-"), NONE, CM_EINVAL, "unexpected argument \"-\"");
        config_test_expect_error(ARGS("--", "x"), NONE, CM_EINVAL, "unexpected argument \"x\"");
        config_test_expect_error(ARGS("--webhook-port"), NONE, CM_EINVAL,
                                 "--webhook-port: missing value");
        config_test_expect_error(
                ARGS("--webhook-port=x"), NONE, CM_EINVAL,
                "--webhook-port: invalid value \"x\": expected an integer between 0 and "
                "65535");
        config_test_expect_error(
                ARGS("--webhook-port", "70000"), NONE, CM_EINVAL,
                "--webhook-port: invalid value \"70000\": expected an integer between 0 "
                "and 65535");
        config_test_expect_error(
                ARGS("--webhook-port="), NONE, CM_EINVAL,
                "--webhook-port: invalid value \"\": expected an integer between 0 and "
                "65535");
        config_test_expect_error(ARGS("--leader-elect=yes"), NONE, CM_EINVAL,
                                 "--leader-elect: invalid value \"yes\": expected true or false");
        config_test_expect_error(
                ARGS("--sync-period=10"), NONE, CM_EINVAL,
                "--sync-period: invalid value \"10\": expected a duration between 1s and "
                "168h, such as 90s or 1h30m");
        config_test_expect_error(
                ARGS("--sync-period=-1s"), NONE, CM_EINVAL,
                "--sync-period: invalid value \"-1s\": expected a duration between 1s and "
                "168h, such as 90s or 1h30m");
        config_test_expect_error(
                ARGS("--webhook-read-timeout=1500ms"), NONE, CM_EINVAL,
                "--webhook-read-timeout: invalid value \"1500ms\": expected whole seconds "
                "between 1s and 1h, such as 30s");
        config_test_expect_error(
                ARGS("--webhook-read-timeout=0s"), NONE, CM_EINVAL,
                "--webhook-read-timeout: invalid value \"0s\": expected whole seconds "
                "between 1s and 1h, such as 30s");
        config_test_expect_error(
                ARGS("--kube-api-qps=fast"), NONE, CM_EINVAL,
                "--kube-api-qps: invalid value \"fast\": expected a number between 0.1 "
                "and 100000");
}

static void test_config__range_and_enum_errors(void **state)
{
        (void)state;
        config_test_expect_error(
                ARGS("--webhook-threads=-1"), NONE, CM_EINVAL,
                "--webhook-threads: invalid value \"-1\": expected an integer between 0 "
                "and 256");
        config_test_expect_error(
                ARGS("--webhook-threads=257"), NONE, CM_EINVAL,
                "--webhook-threads: invalid value \"257\": expected an integer between 0 "
                "and 256");
        config_test_expect_error(
                ARGS("--webhook-max-body-bytes=1023"), NONE, CM_EINVAL,
                "--webhook-max-body-bytes: invalid value \"1023\": expected a size between "
                "1Ki and 64Mi (bytes, or with a Ki, Mi or Gi suffix)");
        config_test_expect_error(
                ARGS("--webhook-max-body-bytes=65Mi"), NONE, CM_EINVAL,
                "--webhook-max-body-bytes: invalid value \"65Mi\": expected a size between "
                "1Ki and 64Mi (bytes, or with a Ki, Mi or Gi suffix)");
        config_test_expect_error(
                ARGS("--tls-min-version=VersionTLS11"), NONE, CM_EINVAL,
                "--tls-min-version: invalid value \"VersionTLS11\": expected VersionTLS12 "
                "or VersionTLS13");
        config_test_expect_error(
                ARGS("--release-erase=secure"), NONE, CM_EINVAL,
                "--release-erase: invalid value \"secure\": expected none, quick or full");
        config_test_expect_error(ARGS("--logging-format=xml"), NONE, CM_EINVAL,
                                 "--logging-format: invalid value \"xml\": expected json or text");
        config_test_expect_error(
                ARGS("--metrics-bind-addr=8080"), NONE, CM_EINVAL,
                "--metrics-bind-addr: invalid value \"8080\": expected HOST:PORT (such as "
                ":8080, 127.0.0.1:8080 or [::1]:8080), or 0 to disable");
        config_test_expect_error(
                ARGS("--namespace=Team_A"), NONE, CM_EINVAL,
                "--namespace: invalid value \"Team_A\": expected a namespace name "
                "(lowercase letters, digits and '-', at most 63 characters), or empty for "
                "all namespaces");
        config_test_expect_error(
                ARGS("--webhook-host=a b"), NONE, CM_EINVAL,
                "--webhook-host: invalid value \"a b\": expected a host name or IP "
                "address, or empty for all addresses");
}

static void test_config__enum_values_are_parsed(void **state)
{
        struct config *c = config_test_load_ok(ARGS("--release-erase=full", "--webhook-host=::1",
                                                    "--metrics-bind-addr=[::1]:8081"),
                                               NONE);

        (void)state;
        assert_int_equal(c->release_erase, RELEASE_ERASE_FULL);
        assert_string_equal(c->webhook_host, "::1");
        assert_string_equal(c->metrics_bind_addr, "[::1]:8081");
        config_free(c);
}

static void test_config__api_key_flag_is_refused_without_echo(void **state)
{
        struct config *c = NULL;
        char *err = NULL;

        (void)state;
        assert_int_equal(config_test_load(ARGS("--maas-api-key=ck:tk:verysecret"), NONE, &c, &err),
                         CM_EINVAL);
        assert_string_equal(err, "--maas-api-key: not accepted on the command line; use "
                                 "--maas-api-key-file or $MAAS_API_KEY");
        assert_null(strstr(err, "verysecret"));
        free(err);
}

/* ---- cross-field rules ---- */

static void test_config__leader_election_timing_rules(void **state)
{
        struct config *c;

        (void)state;
        config_test_expect_error(ARGS("--leader-elect-renew-deadline=15s"), NONE, CM_EINVAL,
                                 "leader-elect-renew-deadline (15s) must be shorter than "
                                 "leader-elect-lease-duration (15s)");
        config_test_expect_error(ARGS("--leader-elect-retry-period=9s"), NONE, CM_EINVAL,
                                 "leader-elect-renew-deadline (10s) must be longer than 1.2 times "
                                 "leader-elect-retry-period (9s)");
        config_test_expect_error(ARGS("--leader-elect-retry-period=8500ms"), NONE, CM_EINVAL,
                                 "leader-elect-renew-deadline (10s) must be longer than 1.2 times "
                                 "leader-elect-retry-period (8s500ms)");
        c = config_test_load_ok(ARGS("--leader-elect-retry-period=8s"), NONE);
        assert_int_equal(c->leader_elect_retry_period_ms, 8000);
        config_free(c);
}

/* ---- environment ---- */

static void test_config__env_errors_name_the_variable(void **state)
{
        (void)state;
        config_test_expect_error(
                NONE, ARGS("CAPMAAS_WEBHOOK_PORT=abc"), CM_EINVAL,
                "$CAPMAAS_WEBHOOK_PORT: invalid value \"abc\": expected an integer "
                "between 0 and 65535");
        config_test_expect_error(
                NONE, ARGS("MAAS_ENDPOINT=ftp://maas"), CM_EINVAL,
                "$MAAS_ENDPOINT: invalid value \"ftp://maas\": expected an http:// or "
                "https:// URL");
        config_test_expect_error(
                NONE, ARGS("POD_NAMESPACE=Bad_NS"), CM_EINVAL,
                "$POD_NAMESPACE: invalid value \"Bad_NS\": expected a namespace name "
                "(lowercase letters, digits and '-', at most 63 characters)");
}

static void test_config__maas_and_kube_env_names(void **state)
{
        struct config *c = config_test_load_ok(
                NONE, ARGS("MAAS_ENDPOINT=http://maas:5240/MAAS", "MAAS_API_KEY=ck:tk:ts",
                           "MAAS_CA_CERT=/ca.pem", "KUBECONFIG=/kube/config", "POD_NAMESPACE=ops",
                           "UNRELATED=x", "CAPMAAS_SERVICE_HOST=10.0.0.1"));

        (void)state;
        assert_string_equal(c->maas_endpoint, "http://maas:5240/MAAS");
        assert_string_equal(c->maas_api_key, "ck:tk:ts");
        assert_string_equal(c->maas_ca_file, "/ca.pem");
        assert_string_equal(c->kubeconfig, "/kube/config");
        assert_string_equal(c->leader_election_namespace, "ops");
        config_free(c);
}

static void test_config__capmaas_env_beats_alias_env(void **state)
{
        struct config *c =
                config_test_load_ok(NONE, ARGS("MAAS_ENDPOINT=http://alias/MAAS",
                                               "CAPMAAS_MAAS_ENDPOINT=http://primary/MAAS",
                                               "KUBECONFIG=/alias", "CAPMAAS_KUBECONFIG=/primary"));

        (void)state;
        assert_string_equal(c->maas_endpoint, "http://primary/MAAS");
        assert_string_equal(c->kubeconfig, "/primary");
        config_free(c);
}

static void test_config__pod_namespace_is_only_a_default(void **state)
{
        char *path = config_test_write_file("lens.yaml", "leader-election-namespace: from-file\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c = config_test_load_ok(ARGS(flag), ARGS("POD_NAMESPACE=from-pod"));

        (void)state;
        assert_string_equal(c->leader_election_namespace, "from-file");
        config_free(c);
        c = config_test_load_ok(
                NONE, ARGS("POD_NAMESPACE=from-pod", "CAPMAAS_LEADER_ELECTION_NAMESPACE=from-env"));
        assert_string_equal(c->leader_election_namespace, "from-env");
        config_free(c);
        free(flag);
        free(path);
}

static void test_config__empty_env_is_ignored(void **state)
{
        struct config *c = config_test_load_ok(
                NONE, ARGS("CAPMAAS_WEBHOOK_PORT=", "KUBECONFIG=", "POD_NAMESPACE="));

        (void)state;
        assert_int_equal(c->webhook_port, 9443);
        assert_null(c->kubeconfig);
        assert_string_equal(c->leader_election_namespace, "capmaas-system");
        config_free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_config__defaults_match_the_documented_values),
                cmocka_unit_test(test_config__every_option_settable_by_flag),
                cmocka_unit_test(test_config__every_option_settable_by_env),
                cmocka_unit_test(test_config__every_option_settable_by_file),
                cmocka_unit_test(test_config__plain_yaml_scalars_are_accepted),
                cmocka_unit_test(test_config__config_file_from_env),
                cmocka_unit_test(test_config__config_flag_beats_config_env),
                cmocka_unit_test(test_config__empty_file_keeps_defaults),
                cmocka_unit_test(test_config__precedence_flag_env_file_default_all_combinations),
                cmocka_unit_test(test_config__last_flag_wins),
                cmocka_unit_test(test_config__boolean_flag_forms),
                cmocka_unit_test(test_config__value_flag_forms),
                cmocka_unit_test(test_config__verbosity_forms),
                cmocka_unit_test(test_config__help_and_version_flags),
                cmocka_unit_test(test_config__flag_errors_name_the_flag),
                cmocka_unit_test(test_config__range_and_enum_errors),
                cmocka_unit_test(test_config__enum_values_are_parsed),
                cmocka_unit_test(test_config__api_key_flag_is_refused_without_echo),
                cmocka_unit_test(test_config__leader_election_timing_rules),
                cmocka_unit_test(test_config__env_errors_name_the_variable),
                cmocka_unit_test(test_config__maas_and_kube_env_names),
                cmocka_unit_test(test_config__capmaas_env_beats_alias_env),
                cmocka_unit_test(test_config__pod_namespace_is_only_a_default),
                cmocka_unit_test(test_config__empty_env_is_ignored),
        };

        return cmocka_run_group_tests_name("config", tests, config_test_group_setup,
                                           config_test_group_teardown);
}
