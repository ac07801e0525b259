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

/* ---- every option: its default, and the value config_test_opts sets ---- */

enum field_type { STR, FLAG, U16, UINT, INT, U64, SIZE, REAL, ENUM, GATES, SUITES };

struct field_case {
        const char *name;
        size_t off;
        enum field_type type;
        const char *dflt_s, *set_s; /* STR (NULL = unset) */
        double dflt, set;           /* the others */
};

#define F(field, type) #field, offsetof(struct config, field), type

static const struct field_case fields[] = {
        { F(kubeconfig, STR), NULL, "/etc/kube/config", 0, 0 },
        { F(webhooks_only, FLAG), NULL, NULL, false, true },
        { F(namespace, STR), "", "team-a", 0, 0 },
        { F(watch_filter, STR), "", "prod", 0, 0 },
        { F(kube_api_qps, REAL), NULL, NULL, 20.0, 50.5 },
        { F(kube_api_burst, UINT), NULL, NULL, 30, 100 },
        { F(sync_period_ms, U64), NULL, NULL, 120 * 60000, 3600000 },
        { F(leader_elect, FLAG), NULL, NULL, false, true },
        { F(leader_election_id, STR), "controller-leader-election-capmaas", "my-lock", 0, 0 },
        { F(leader_election_namespace, STR), "capmaas-system", "kube-system", 0, 0 },
        { F(leader_elect_lease_duration_ms, U64), NULL, NULL, 15000, 30000 },
        { F(leader_elect_renew_deadline_ms, U64), NULL, NULL, 10000, 20000 },
        { F(leader_elect_retry_period_ms, U64), NULL, NULL, 2000, 5000 },
        { F(machine_concurrency, UINT), NULL, NULL, 2, 8 },
        { F(cluster_concurrency, UINT), NULL, NULL, 2, 4 },
        { F(deploy_timeout_ms, U64), NULL, NULL, 30 * 60000, 45 * 60000 },
        { F(release_erase, ENUM), NULL, NULL, RELEASE_ERASE_NONE, RELEASE_ERASE_QUICK },
        { F(webhook_host, STR), "", "127.0.0.1", 0, 0 },
        { F(webhook_port, U16), NULL, NULL, 9443, 10443 },
        { F(webhook_cert_dir, STR), "/tmp/k8s-webhook-server/serving-certs", "/certs", 0, 0 },
        { F(webhook_cert_name, STR), "tls.crt", "server.crt", 0, 0 },
        { F(webhook_key_name, STR), "tls.key", "server.key", 0, 0 },
        { F(tls_min_version, ENUM), NULL, NULL, TLS_VERSION_12, TLS_VERSION_13 },
        { F(webhook_threads, UINT), NULL, NULL, 0, 8 },
        { F(webhook_max_connections, UINT), NULL, NULL, 1024, 64 },
        { F(webhook_connection_memory_limit, SIZE), NULL, NULL, 8 * 1024, 128 * 1024 },
        { F(webhook_max_body_bytes, SIZE), NULL, NULL, 4 * 1024 * 1024, 2 * 1024 * 1024 },
        { F(webhook_read_timeout_s, UINT), NULL, NULL, 10, 30 },
        { F(webhook_read_header_timeout_ms, U64), NULL, NULL, 5000, 2000 },
        { F(webhook_max_connections_per_address, UINT), NULL, NULL, 64, 32 },
        { F(graceful_shutdown_timeout_ms, U64), NULL, NULL, 30000, 60000 },
        { F(tls_cipher_suites, SUITES), NULL, NULL, 0, 2 },
        { F(diagnostics_address, STR), ":8443", "127.0.0.1:18443", 0, 0 },
        { F(insecure_diagnostics, FLAG), NULL, NULL, false, true },
        { F(metrics_bind_addr, STR), "0", "127.0.0.1:18080", 0, 0 },
        { F(feature_gates, GATES), NULL, NULL, 0,
          (1u << FEATURE_MACHINE_POOL) | (1u << FEATURE_CLUSTER_TOPOLOGY) },
        { F(health_addr, STR), ":9440", "0", 0, 0 },
        { F(verbosity, INT), NULL, NULL, 0, 3 },
        { F(logging_format, ENUM), NULL, NULL, LOG_FORMAT_JSON, LOG_FORMAT_TEXT },
        { F(maas_endpoint, STR), NULL, "http://maas.example:5240/MAAS", 0, 0 },
        { F(maas_api_key, STR), NULL, "ck:tk:ts", 0, 0 },
        { F(maas_ca_file, STR), NULL, "/etc/maas/ca.crt", 0, 0 },
        { F(maas_insecure_skip_verify, FLAG), NULL, NULL, false, true },
        { F(maas_timeout_ms, U64), NULL, NULL, 30000, 45000 },
        { F(maas_api_qps, REAL), NULL, NULL, 50.0, 0.0 },
        { F(maas_api_burst, UINT), NULL, NULL, 100, 7 },
        { F(maas_inventory_interval_ms, U64), NULL, NULL, 60000, 120000 },
        { F(maas_identity_cache_max, UINT), NULL, NULL, 8, 16 },
        { F(admission_maas_checks, FLAG), NULL, NULL, true, false },
};

/* The numeric value of field fc of c. */
static double field_number(const struct config *c, const struct field_case *fc)
{
        const char *p = (const char *)c + fc->off;

        switch (fc->type) {
        case FLAG:
                return *(const bool *)p;
        case U16:
                return *(const uint16_t *)p;
        case UINT:
                return *(const unsigned *)p;
        case INT:
                return *(const int *)p;
        case U64:
                return (double)*(const uint64_t *)p;
        case SIZE:
                return (double)*(const size_t *)p;
        case REAL:
                return *(const double *)p;
        case ENUM:
                return *(const int *)p;
        case GATES:
                return ((const struct feature_gates *)(const void *)p)->set;
        case SUITES:
                return ((const struct tls_cipher_suites *)(const void *)p)->n;
        case STR:
                break;
        }
        fail_msg("%s: not a number", fc->name);
        return 0;
}

/* Every field of c is its default (set false) or the value config_test_opts sets (true). */
static void check_fields(const struct config *c, bool set)
{
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                const struct field_case *fc = &fields[i];
                const char *want_s = set ? fc->set_s : fc->dflt_s;
                double want = set ? fc->set : fc->dflt;
                const char *got_s;
                double got;

                if (fc->type == STR) {
                        memcpy(&got_s, (const char *)c + fc->off, sizeof(got_s));
                        if (!want_s && got_s)
                                fail_msg("%s: \"%s\", want unset", fc->name, got_s);
                        if (want_s && (!got_s || strcmp(got_s, want_s) != 0))
                                fail_msg("%s: \"%s\", want \"%s\"", fc->name,
                                         got_s ? got_s : "(unset)", want_s);
                        continue;
                }
                got = field_number(c, fc);
                if (got != want)
                        fail_msg("%s: %g, want %g", fc->name, got, want);
        }
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
        check_fields(c, true);
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
        check_fields(c, false);
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

/* Loads with --config=<the file name holding yaml> and env; *ret_path (may be NULL) gets
 * the file's path (caller frees). */
static struct config *load_file(const char *name,
                                const char *yaml,
                                const char *const *env,
                                char **ret_path)
{
        char *path = config_test_write_file(name, yaml);
        char *flag = xasprintf("--config=%s", path);
        struct config *c = config_test_load_ok(ARGS(flag), env);

        free(flag);
        if (ret_path)
                *ret_path = path;
        else
                free(path);
        return c;
}

static void test_config__plain_yaml_scalars_are_accepted(void **state)
{
        char *path;
        struct config *c = load_file("plain.yaml",
                                     "# comment\n"
                                     "webhook-port: 10443\n"
                                     "leader-elect: true\n"
                                     "health-addr: 127.0.0.1:9999\n"
                                     "maas-endpoint: http://10.0.0.2:5240/MAAS\n"
                                     "kube-api-qps: 7.5\n"
                                     "namespace: ''\n",
                                     NONE, &path);

        (void)state;
        assert_int_equal(c->webhook_port, 10443);
        assert_true(c->leader_elect);
        assert_string_equal(c->health_addr, "127.0.0.1:9999");
        assert_string_equal(c->maas_endpoint, "http://10.0.0.2:5240/MAAS");
        assert_true(c->kube_api_qps == 7.5);
        assert_string_equal(c->namespace, "");
        assert_string_equal(c->config_file, path);
        config_free(c);
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
        struct config *c = load_file("empty.yaml", "# nothing set here\n", NONE, NULL);

        (void)state;
        assert_int_equal(c->webhook_port, 9443);
        config_free(c);
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

/* Arguments that fail with CM_EINVAL, and the message. */
struct flag_error {
        const char *args[3];
        const char *message;
};

static void expect_flag_errors(const struct flag_error *t, size_t n)
{
        for (size_t i = 0; i < n; i++)
                config_test_expect_error(t[i].args, NONE, CM_EINVAL, t[i].message);
}

static const struct flag_error flag_errors[] = {
        { { "--foo" }, "unknown flag --foo" },
        { { "--no-such-flag" }, "unknown flag --no-such-flag" },
        { { "--no-such-flag", "x" }, "unknown flag --no-such-flag" },
        { { "--foo=1" }, "unknown flag --foo" },
        { { "-x" }, "unknown flag -x" },
        { { "---webhook-port=1" }, "unknown flag ---webhook-port" },
        { { "extra" }, "unexpected argument \"extra\"" },
        { { "-" }, "unexpected argument \"-\"" },
        { { "--", "x" }, "unexpected argument \"x\"" },
        { { "--webhook-port" }, "--webhook-port: missing value" },
        { { "--webhook-port=x" },
          "--webhook-port: invalid value \"x\": expected an integer between 0 and "
          "65535" },
        { { "--webhook-port", "70000" },
          "--webhook-port: invalid value \"70000\": expected an integer between 0 "
          "and 65535" },
        { { "--webhook-port=" },
          "--webhook-port: invalid value \"\": expected an integer between 0 and "
          "65535" },
        { { "--leader-elect=yes" },
          "--leader-elect: invalid value \"yes\": expected true or false" },
        { { "--sync-period=10" },
          "--sync-period: invalid value \"10\": expected a duration between 1s and "
          "168h, such as 90s or 1h30m" },
        { { "--sync-period=-1s" },
          "--sync-period: invalid value \"-1s\": expected a duration between 1s and "
          "168h, such as 90s or 1h30m" },
        { { "--webhook-read-timeout=1500ms" },
          "--webhook-read-timeout: invalid value \"1500ms\": expected whole seconds "
          "between 1s and 1h, such as 30s" },
        { { "--webhook-read-timeout=0s" },
          "--webhook-read-timeout: invalid value \"0s\": expected whole seconds "
          "between 1s and 1h, such as 30s" },
        { { "--kube-api-qps=fast" },
          "--kube-api-qps: invalid value \"fast\": expected a number between 0.1 "
          "and 100000" },
};

static void test_config__flag_errors_name_the_flag(void **state)
{
        (void)state;
        expect_flag_errors(flag_errors, ARRAY_SIZE(flag_errors));
}

static const struct flag_error range_and_enum_errors[] = {
        { { "--webhook-threads=-1" },
          "--webhook-threads: invalid value \"-1\": expected an integer between 0 "
          "and 256" },
        { { "--webhook-threads=257" },
          "--webhook-threads: invalid value \"257\": expected an integer between 0 "
          "and 256" },
        { { "--maas-identity-cache-max=0" },
          "--maas-identity-cache-max: invalid value \"0\": expected an integer between 1 "
          "and 1024" },
        { { "--maas-identity-cache-max=1025" },
          "--maas-identity-cache-max: invalid value \"1025\": expected an integer between "
          "1 and 1024" },
        { { "--webhook-max-body-bytes=1023" },
          "--webhook-max-body-bytes: invalid value \"1023\": expected a size between "
          "1Ki and 64Mi (bytes, or with a Ki, Mi or Gi suffix)" },
        { { "--webhook-max-body-bytes=65Mi" },
          "--webhook-max-body-bytes: invalid value \"65Mi\": expected a size between "
          "1Ki and 64Mi (bytes, or with a Ki, Mi or Gi suffix)" },
        { { "--tls-min-version=VersionTLS11" },
          "--tls-min-version: invalid value \"VersionTLS11\": expected VersionTLS12 "
          "or VersionTLS13" },
        { { "--release-erase=secure" },
          "--release-erase: invalid value \"secure\": expected none, quick or full" },
        { { "--logging-format=xml" },
          "--logging-format: invalid value \"xml\": expected json or text" },
        { { "--metrics-bind-addr=8080" },
          "--metrics-bind-addr: invalid value \"8080\": expected HOST:PORT (such as "
          ":8080, 127.0.0.1:8080 or [::1]:8080), or 0 to disable" },
        { { "--namespace=Team_A" },
          "--namespace: invalid value \"Team_A\": expected a namespace name "
          "(lowercase letters, digits and '-', at most 63 characters), or empty for "
          "all namespaces" },
        { { "--webhook-host=a b" },
          "--webhook-host: invalid value \"a b\": expected a host name or IP "
          "address, or empty for all addresses" },
};

static void test_config__range_and_enum_errors(void **state)
{
        (void)state;
        expect_flag_errors(range_and_enum_errors, ARRAY_SIZE(range_and_enum_errors));
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
        struct config *c = load_file("lens.yaml", "leader-election-namespace: from-file\n",
                                     ARGS("POD_NAMESPACE=from-pod"), NULL);

        (void)state;
        assert_string_equal(c->leader_election_namespace, "from-file");
        config_free(c);
        c = config_test_load_ok(
                NONE, ARGS("POD_NAMESPACE=from-pod", "CAPMAAS_LEADER_ELECTION_NAMESPACE=from-env"));
        assert_string_equal(c->leader_election_namespace, "from-env");
        config_free(c);
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
