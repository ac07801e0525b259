/*
 * Unit tests for config: defaults, each source, precedence, every error message, flag
 * syntax, the MAAS variables, the API key file, --help and the sample file. YAML files are
 * written to a mkdtemp directory that the group teardown removes.
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
#include "err.h"
#include "xalloc.h"

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define NONE      ((const char *const[]){ NULL })

static char tmpdir[64];

/* ---- helpers ---- */

static int group_setup(void **state)
{
        (void)state;
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/capmaas-config-XXXXXX");
        return mkdtemp(tmpdir) ? 0 : -1;
}

static int group_teardown(void **state)
{
        DIR *d = opendir(tmpdir);
        struct dirent *e;
        char *path;

        (void)state;
        if (!d)
                return -1;
        while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                path = xasprintf("%s/%s", tmpdir, e->d_name);
                unlink(path);
                free(path);
        }
        closedir(d);
        return rmdir(tmpdir);
}

/* Writes content to tmpdir/name; returns the path (caller frees). */
static char *write_file(const char *name, const char *content)
{
        char *path = xasprintf("%s/%s", tmpdir, name);
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        assert_int_equal(fputs(content, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
        return path;
}

static char *write_filler(const char *name, size_t size)
{
        char *data = xmalloc(size + 1);
        char *path;

        memset(data, '#', size);
        data[size] = '\0';
        path = write_file(name, data);
        free(data);
        return path;
}

/* A heap copy of a NULL-terminated list, optionally with first prepended. */
static char **dupv(const char *first, const char *const *v, int *ret_n)
{
        size_t n = 0, i = 0;
        char **out;

        while (v[n])
                n++;
        out = xcalloc(n + 2, sizeof(*out));
        if (first)
                out[i++] = xstrdup(first);
        for (size_t j = 0; j < n; j++)
                out[i++] = xstrdup(v[j]);
        if (ret_n)
                *ret_n = (int)i;
        return out;
}

static void freev(char **v)
{
        for (size_t i = 0; v[i]; i++)
                free(v[i]);
        free(v);
}

static int load(const char *const *args, const char *const *env, struct config **ret, char **reterr)
{
        int argc;
        char **argv = dupv("capmaas", args, &argc);
        char **envp = dupv(NULL, env, NULL);
        int r;

        *reterr = NULL;
        r = config_load(argc, argv, envp, ret, reterr);
        freev(argv);
        freev(envp);
        return r;
}

static struct config *load_ok(const char *const *args, const char *const *env)
{
        struct config *c = NULL;
        char *err = NULL;

        if (load(args, env, &c, &err) < 0)
                fail_msg("config_load failed: %s", err);
        assert_null(err);
        assert_non_null(c);
        return c;
}

static void expect_error(const char *const *args, const char *const *env, int rc, const char *msg)
{
        struct config *c = NULL;
        char *err = NULL;

        assert_int_equal(load(args, env, &c, &err), rc);
        assert_null(c);
        assert_non_null(err);
        assert_string_equal(err, msg);
        free(err);
}

/* Loads a YAML text from a file and expects an error "<path><suffix>". */
static void expect_file_error(const char *name, const char *yaml, int rc, const char *suffix)
{
        char *path = write_file(name, yaml);
        char *flag = xasprintf("--config=%s", path);
        char *msg = xasprintf("%s%s", path, suffix);

        expect_error(ARGS(flag), NONE, rc, msg);
        free(msg);
        free(flag);
        free(path);
}

/* ---- every option with a non-default value, for flags, environment and file ---- */

struct opt {
        const char *name;
        const char *value; /* NULL = the API key file path, filled in at run time */
};

static const struct opt all_opts[] = {
        { "kubeconfig", "/etc/kube/config" },
        { "webhooks-only", "true" },
        { "namespace", "team-a" },
        { "watch-filter", "prod" },
        { "kube-api-qps", "50.5" },
        { "kube-api-burst", "100" },
        { "sync-period", "1h" },
        { "leader-elect", "true" },
        { "leader-election-id", "my-lock" },
        { "leader-election-namespace", "kube-system" },
        { "leader-elect-lease-duration", "30s" },
        { "leader-elect-renew-deadline", "20s" },
        { "leader-elect-retry-period", "5s" },
        { "machine-concurrency", "8" },
        { "maascluster-concurrency", "4" },
        { "deploy-timeout", "45m" },
        { "release-erase", "quick" },
        { "webhook-host", "127.0.0.1" },
        { "webhook-port", "10443" },
        { "webhook-cert-dir", "/certs" },
        { "webhook-cert-name", "server.crt" },
        { "webhook-key-name", "server.key" },
        { "tls-min-version", "VersionTLS13" },
        { "webhook-threads", "8" },
        { "webhook-max-connections", "64" },
        { "webhook-connection-memory-limit", "128Ki" },
        { "webhook-max-body-bytes", "2Mi" },
        { "webhook-read-timeout", "30s" },
        { "graceful-shutdown-timeout", "1m" },
        { "metrics-bind-addr", "127.0.0.1:18080" },
        { "health-addr", "0" },
        { "v", "3" },
        { "logging-format", "text" },
        { "maas-endpoint", "http://maas.example:5240/MAAS" },
        { "maas-api-key-file", NULL },
        { "maas-ca-file", "/etc/maas/ca.crt" },
        { "maas-insecure-skip-verify", "true" },
        { "maas-timeout", "45s" },
        { "maas-inventory-interval", "2m" },
        { "admission-maas-checks", "false" },
};

#define N_OPTS (sizeof(all_opts) / sizeof(all_opts[0]))

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

static char *env_name_of(const char *flag)
{
        char *s = xasprintf("CAPMAAS_%s", flag);

        for (char *p = s; *p; p++)
                *p = (char)(*p == '-' ? '_' : toupper((unsigned char)*p));
        return s;
}

enum source {
        FROM_FLAG,
        FROM_ENV,
        FROM_FILE,
};

static void load_all_from(enum source src)
{
        char *key_path = write_file("all.key", "ck:tk:ts\n");
        char *words[N_OPTS + 1] = { NULL };
        char *yaml = xstrdup(""), *tmp, *yaml_path = NULL, *flag = NULL;
        const char *file_args[2] = { NULL, NULL };
        const char *const *args = NONE, *const *env = NONE;
        struct config *c;

        for (size_t i = 0; i < N_OPTS; i++) {
                const char *v = all_opts[i].value ? all_opts[i].value : key_path;
                char *upper = env_name_of(all_opts[i].name);

                if (src == FROM_FLAG)
                        words[i] = xasprintf("--%s=%s", all_opts[i].name, v);
                else if (src == FROM_ENV)
                        words[i] = xasprintf("%s=%s", upper, v);
                tmp = xasprintf("%s%s: \"%s\"\n", yaml, all_opts[i].name, v);
                free(yaml);
                yaml = tmp;
                free(upper);
        }
        if (src == FROM_FILE) {
                yaml_path = write_file("all.yaml", yaml);
                flag = xasprintf("--config=%s", yaml_path);
                file_args[0] = flag;
                args = file_args;
        } else if (src == FROM_FLAG) {
                args = (const char *const *)words;
        } else {
                env = (const char *const *)words;
        }
        c = load_ok(args, env);
        check_all_set(c);
        config_free(c);
        for (size_t i = 0; i < N_OPTS; i++)
                free(words[i]);
        free(flag);
        free(yaml_path);
        free(yaml);
        free(key_path);
}

/* ---- defaults and sources ---- */

static void test_config__defaults_match_the_documented_values(void **state)
{
        struct config *c = load_ok(NONE, NONE);

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
        char *path = write_file("plain.yaml", "# comment\n"
                                              "webhook-port: 10443\n"
                                              "leader-elect: true\n"
                                              "health-addr: 127.0.0.1:9999\n"
                                              "maas-endpoint: http://10.0.0.2:5240/MAAS\n"
                                              "kube-api-qps: 7.5\n"
                                              "namespace: ''\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c = load_ok(ARGS(flag), NONE);

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
        char *path = write_file("envcfg.yaml", "webhook-port: 1234\n");
        char *var = xasprintf("CAPMAAS_CONFIG=%s", path);
        struct config *c = load_ok(NONE, ARGS(var));

        (void)state;
        assert_int_equal(c->webhook_port, 1234);
        assert_string_equal(c->config_file, path);
        config_free(c);
        free(var);
        free(path);
}

static void test_config__config_flag_beats_config_env(void **state)
{
        char *a = write_file("a.yaml", "webhook-port: 1111\n");
        char *b = write_file("b.yaml", "webhook-port: 2222\n");
        char *flag = xasprintf("--config=%s", a);
        char *var = xasprintf("CAPMAAS_CONFIG=%s", b);
        struct config *c = load_ok(ARGS(flag), ARGS(var));

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
        char *path = write_file("empty.yaml", "# nothing set here\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c = load_ok(ARGS(flag), NONE);

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
        char *env_var = env_name_of(pc->name);
        char *flag = xasprintf("--%s=%s", pc->name, pc->values[0]);
        char *env = xasprintf("%s=%s", env_var, pc->values[1]);
        char *yaml = xasprintf("%s: %s\n", pc->name, pc->values[2]);
        char *path = write_file("prec.yaml", yaml);
        char *cfg = xasprintf("--config=%s", path);
        char *got;
        const char *const *args = (mask & 1) ? ARGS(cfg, flag) : ARGS(cfg);
        const char *const *envp = (mask & 2) ? ARGS(env) : NONE;
        struct config *c;

        if (!(mask & 4)) {
                free(path);
                path = write_file("prec.yaml", "# nothing\n");
        }
        c = load_ok(args, envp);
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
        struct config *c = load_ok(ARGS("--webhook-port=1", "--webhook-port", "2"), NONE);

        (void)state;
        assert_int_equal(c->webhook_port, 2);
        config_free(c);
}

/* ---- flag syntax ---- */

static void test_config__boolean_flag_forms(void **state)
{
        struct config *c;

        (void)state;
        c = load_ok(ARGS("--leader-elect"), NONE);
        assert_true(c->leader_elect);
        config_free(c);
        c = load_ok(ARGS("--leader-elect=false"), ARGS("CAPMAAS_LEADER_ELECT=true"));
        assert_false(c->leader_elect);
        config_free(c);
        c = load_ok(ARGS("-leader-elect=1", "--admission-maas-checks=F"), NONE);
        assert_true(c->leader_elect);
        assert_false(c->admission_maas_checks);
        config_free(c);
        /* a boolean never takes the next word */
        c = load_ok(ARGS("--leader-elect", "--webhook-port", "1234"), NONE);
        assert_true(c->leader_elect);
        assert_int_equal(c->webhook_port, 1234);
        config_free(c);
        expect_error(ARGS("--leader-elect", "false"), NONE, CM_EINVAL,
                     "unexpected argument \"false\"");
}

static void test_config__value_flag_forms(void **state)
{
        struct config *c;

        (void)state;
        c = load_ok(ARGS("--namespace", "ns1", "-webhook-port", "9000", "--watch-filter=a.b"),
                    NONE);
        assert_string_equal(c->namespace, "ns1");
        assert_int_equal(c->webhook_port, 9000);
        assert_string_equal(c->watch_filter, "a.b");
        config_free(c);
        expect_error(ARGS("--watch-filter=a=b"), NONE, CM_EINVAL,
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
                c = forms[i][1] ? load_ok(ARGS(forms[i][0], forms[i][1]), NONE)
                                : load_ok(ARGS(forms[i][0]), NONE);
                assert_int_equal(c->verbosity, 2);
                config_free(c);
        }
        c = load_ok(NONE, ARGS("CAPMAAS_V=4"));
        assert_int_equal(c->verbosity, 4);
        config_free(c);
        expect_error(ARGS("-v"), NONE, CM_EINVAL, "-v: missing value");
        expect_error(ARGS("-v=11"), NONE, CM_EINVAL,
                     "-v: invalid value \"11\": expected an integer between 0 and 10");
        expect_error(ARGS("-v=-1"), NONE, CM_EINVAL,
                     "-v: invalid value \"-1\": expected an integer between 0 and 10");
        expect_error(ARGS("-v2"), NONE, CM_EINVAL, "unknown flag -v2");
}

static void test_config__help_and_version_flags(void **state)
{
        char *path = write_file("broken.yaml", "webhok-port: 1\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c;

        (void)state;
        c = load_ok(ARGS("-h"), NONE);
        assert_true(c->help);
        config_free(c);
        c = load_ok(ARGS("--help"), NONE);
        assert_true(c->help);
        config_free(c);
        c = load_ok(ARGS("--version"), NONE);
        assert_true(c->version);
        assert_false(c->help);
        config_free(c);
        /* --help works even when the file or the environment is broken */
        c = load_ok(ARGS(flag, "--help"), ARGS("CAPMAAS_WEBHOOK_PORT=x", "POD_NAMESPACE=B_d"));
        assert_true(c->help);
        config_free(c);
        expect_error(NONE, ARGS("CAPMAAS_HELP=true", "CAPMAAS_WEBHOOK_PORT=x"), CM_EINVAL,
                     "$CAPMAAS_WEBHOOK_PORT: invalid value \"x\": expected an integer between "
                     "0 and 65535");
        free(flag);
        free(path);
}

/* ---- flag errors ---- */

static void test_config__flag_errors_name_the_flag(void **state)
{
        (void)state;
        expect_error(ARGS("--foo"), NONE, CM_EINVAL, "unknown flag --foo");
        expect_error(ARGS("--foo=1"), NONE, CM_EINVAL, "unknown flag --foo");
        expect_error(ARGS("-x"), NONE, CM_EINVAL, "unknown flag -x");
        expect_error(ARGS("---webhook-port=1"), NONE, CM_EINVAL, "unknown flag ---webhook-port");
        expect_error(ARGS("extra"), NONE, CM_EINVAL, "unexpected argument \"extra\"");
        expect_error(ARGS("-"), NONE, CM_EINVAL, "unexpected argument \"-\"");
        expect_error(ARGS("--", "x"), NONE, CM_EINVAL, "unexpected argument \"x\"");
        expect_error(ARGS("--webhook-port"), NONE, CM_EINVAL, "--webhook-port: missing value");
        expect_error(ARGS("--webhook-port=x"), NONE, CM_EINVAL,
                     "--webhook-port: invalid value \"x\": expected an integer between 0 and "
                     "65535");
        expect_error(ARGS("--webhook-port", "70000"), NONE, CM_EINVAL,
                     "--webhook-port: invalid value \"70000\": expected an integer between 0 "
                     "and 65535");
        expect_error(ARGS("--webhook-port="), NONE, CM_EINVAL,
                     "--webhook-port: invalid value \"\": expected an integer between 0 and "
                     "65535");
        expect_error(ARGS("--leader-elect=yes"), NONE, CM_EINVAL,
                     "--leader-elect: invalid value \"yes\": expected true or false");
        expect_error(ARGS("--sync-period=10"), NONE, CM_EINVAL,
                     "--sync-period: invalid value \"10\": expected a duration between 1s and "
                     "168h, such as 90s or 1h30m");
        expect_error(ARGS("--sync-period=-1s"), NONE, CM_EINVAL,
                     "--sync-period: invalid value \"-1s\": expected a duration between 1s and "
                     "168h, such as 90s or 1h30m");
        expect_error(ARGS("--webhook-read-timeout=1500ms"), NONE, CM_EINVAL,
                     "--webhook-read-timeout: invalid value \"1500ms\": expected whole seconds "
                     "between 1s and 1h, such as 30s");
        expect_error(ARGS("--webhook-read-timeout=0s"), NONE, CM_EINVAL,
                     "--webhook-read-timeout: invalid value \"0s\": expected whole seconds "
                     "between 1s and 1h, such as 30s");
        expect_error(ARGS("--kube-api-qps=fast"), NONE, CM_EINVAL,
                     "--kube-api-qps: invalid value \"fast\": expected a number between 0.1 "
                     "and 100000");
}

static void test_config__range_and_enum_errors(void **state)
{
        (void)state;
        expect_error(ARGS("--webhook-threads=-1"), NONE, CM_EINVAL,
                     "--webhook-threads: invalid value \"-1\": expected an integer between 0 "
                     "and 256");
        expect_error(ARGS("--webhook-threads=257"), NONE, CM_EINVAL,
                     "--webhook-threads: invalid value \"257\": expected an integer between 0 "
                     "and 256");
        expect_error(ARGS("--webhook-max-body-bytes=1023"), NONE, CM_EINVAL,
                     "--webhook-max-body-bytes: invalid value \"1023\": expected a size between "
                     "1Ki and 64Mi (bytes, or with a Ki, Mi or Gi suffix)");
        expect_error(ARGS("--webhook-max-body-bytes=65Mi"), NONE, CM_EINVAL,
                     "--webhook-max-body-bytes: invalid value \"65Mi\": expected a size between "
                     "1Ki and 64Mi (bytes, or with a Ki, Mi or Gi suffix)");
        expect_error(ARGS("--tls-min-version=VersionTLS11"), NONE, CM_EINVAL,
                     "--tls-min-version: invalid value \"VersionTLS11\": expected VersionTLS12 "
                     "or VersionTLS13");
        expect_error(ARGS("--release-erase=secure"), NONE, CM_EINVAL,
                     "--release-erase: invalid value \"secure\": expected none, quick or full");
        expect_error(ARGS("--logging-format=xml"), NONE, CM_EINVAL,
                     "--logging-format: invalid value \"xml\": expected json or text");
        expect_error(ARGS("--metrics-bind-addr=8080"), NONE, CM_EINVAL,
                     "--metrics-bind-addr: invalid value \"8080\": expected HOST:PORT (such as "
                     ":8080, 127.0.0.1:8080 or [::1]:8080), or 0 to disable");
        expect_error(ARGS("--namespace=Team_A"), NONE, CM_EINVAL,
                     "--namespace: invalid value \"Team_A\": expected a namespace name "
                     "(lowercase letters, digits and '-', at most 63 characters), or empty for "
                     "all namespaces");
        expect_error(ARGS("--webhook-host=a b"), NONE, CM_EINVAL,
                     "--webhook-host: invalid value \"a b\": expected a host name or IP "
                     "address, or empty for all addresses");
}

static void test_config__enum_values_are_parsed(void **state)
{
        struct config *c = load_ok(ARGS("--release-erase=full", "--webhook-host=::1",
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
        assert_int_equal(load(ARGS("--maas-api-key=ck:tk:verysecret"), NONE, &c, &err), CM_EINVAL);
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
        expect_error(ARGS("--leader-elect-renew-deadline=15s"), NONE, CM_EINVAL,
                     "leader-elect-renew-deadline (15s) must be shorter than "
                     "leader-elect-lease-duration (15s)");
        expect_error(ARGS("--leader-elect-retry-period=9s"), NONE, CM_EINVAL,
                     "leader-elect-renew-deadline (10s) must be longer than 1.2 times "
                     "leader-elect-retry-period (9s)");
        expect_error(ARGS("--leader-elect-retry-period=8500ms"), NONE, CM_EINVAL,
                     "leader-elect-renew-deadline (10s) must be longer than 1.2 times "
                     "leader-elect-retry-period (8s500ms)");
        c = load_ok(ARGS("--leader-elect-retry-period=8s"), NONE);
        assert_int_equal(c->leader_elect_retry_period_ms, 8000);
        config_free(c);
}

/* ---- environment ---- */

static void test_config__env_errors_name_the_variable(void **state)
{
        (void)state;
        expect_error(NONE, ARGS("CAPMAAS_WEBHOOK_PORT=abc"), CM_EINVAL,
                     "$CAPMAAS_WEBHOOK_PORT: invalid value \"abc\": expected an integer "
                     "between 0 and 65535");
        expect_error(NONE, ARGS("MAAS_ENDPOINT=ftp://maas"), CM_EINVAL,
                     "$MAAS_ENDPOINT: invalid value \"ftp://maas\": expected an http:// or "
                     "https:// URL");
        expect_error(NONE, ARGS("POD_NAMESPACE=Bad_NS"), CM_EINVAL,
                     "$POD_NAMESPACE: invalid value \"Bad_NS\": expected a namespace name "
                     "(lowercase letters, digits and '-', at most 63 characters)");
}

static void test_config__maas_and_kube_env_names(void **state)
{
        struct config *c = load_ok(NONE, ARGS("MAAS_ENDPOINT=http://maas:5240/MAAS",
                                              "MAAS_API_KEY=ck:tk:ts", "MAAS_CA_CERT=/ca.pem",
                                              "KUBECONFIG=/kube/config", "POD_NAMESPACE=ops",
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
        struct config *c = load_ok(NONE, ARGS("MAAS_ENDPOINT=http://alias/MAAS",
                                              "CAPMAAS_MAAS_ENDPOINT=http://primary/MAAS",
                                              "KUBECONFIG=/alias", "CAPMAAS_KUBECONFIG=/primary"));

        (void)state;
        assert_string_equal(c->maas_endpoint, "http://primary/MAAS");
        assert_string_equal(c->kubeconfig, "/primary");
        config_free(c);
}

static void test_config__pod_namespace_is_only_a_default(void **state)
{
        char *path = write_file("lens.yaml", "leader-election-namespace: from-file\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c = load_ok(ARGS(flag), ARGS("POD_NAMESPACE=from-pod"));

        (void)state;
        assert_string_equal(c->leader_election_namespace, "from-file");
        config_free(c);
        c = load_ok(NONE,
                    ARGS("POD_NAMESPACE=from-pod", "CAPMAAS_LEADER_ELECTION_NAMESPACE=from-env"));
        assert_string_equal(c->leader_election_namespace, "from-env");
        config_free(c);
        free(flag);
        free(path);
}

static void test_config__empty_env_is_ignored(void **state)
{
        struct config *c =
                load_ok(NONE, ARGS("CAPMAAS_WEBHOOK_PORT=", "KUBECONFIG=", "POD_NAMESPACE="));

        (void)state;
        assert_int_equal(c->webhook_port, 9443);
        assert_null(c->kubeconfig);
        assert_string_equal(c->leader_election_namespace, "capmaas-system");
        config_free(c);
}

/* ---- API key ---- */

static void test_config__api_key_from_file(void **state)
{
        char *crlf = write_file("crlf.key", "ck:tk:ts\r\n");
        char *envkey = write_file("env.key", "e1:e2:e3\n");
        char *flag = xasprintf("--maas-api-key-file=%s", crlf);
        char *var = xasprintf("CAPMAAS_MAAS_API_KEY_FILE=%s", envkey);
        struct config *c;

        (void)state;
        c = load_ok(ARGS(flag), ARGS("MAAS_API_KEY=x1:x2:x3"));
        assert_string_equal(c->maas_api_key, "ck:tk:ts");
        config_free(c);
        /* at the same level (environment) the file wins over the value */
        c = load_ok(NONE, ARGS(var, "MAAS_API_KEY=x1:x2:x3"));
        assert_string_equal(c->maas_api_key, "e1:e2:e3");
        config_free(c);
        free(var);
        free(flag);
        free(envkey);
        free(crlf);
}

static void test_config__api_key_file_errors(void **state)
{
        char *empty = write_file("empty.key", "\n");
        char *big = write_filler("big.key", 4097);
        char *missing = xasprintf("%s/missing.key", tmpdir);
        char *f1 = xasprintf("--maas-api-key-file=%s", empty);
        char *f2 = xasprintf("--maas-api-key-file=%s", big);
        char *f3 = xasprintf("--maas-api-key-file=%s", missing);
        char *m1 = xasprintf("--maas-api-key-file: %s: expected one line holding the MAAS API key",
                             empty);
        char *m2 = xasprintf("--maas-api-key-file: %s: file is larger than 4096 bytes", big);
        char *m3 = xasprintf("--maas-api-key-file: %s: No such file or directory", missing);

        (void)state;
        expect_error(ARGS(f1), NONE, CM_EINVAL, m1);
        expect_error(ARGS(f2), NONE, CM_ETOOBIG, m2);
        expect_error(ARGS(f3), NONE, CM_EIO, m3);
        free(m3);
        free(m2);
        free(m1);
        free(f3);
        free(f2);
        free(f1);
        free(missing);
        free(big);
        free(empty);
}

static void test_config__malformed_api_key_is_rejected_without_echo(void **state)
{
        static const char *const bad[] = { "MAAS_API_KEY=notakeyvalue", "MAAS_API_KEY=a:b",
                                           "MAAS_API_KEY=a::c", "MAAS_API_KEY=a:b:c:d",
                                           "MAAS_API_KEY=a:b:c d" };

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                expect_error(NONE, ARGS(bad[i]), CM_EINVAL,
                             "MAAS API key: expected consumer_key:token_key:token_secret");
}

/* ---- YAML errors ---- */

static void test_config__yaml_key_and_value_errors_carry_position(void **state)
{
        (void)state;
        expect_file_error("unknown.yaml", "# comment\nwebhook-port: 9443\nwebhok-port: 1\n",
                          CM_EINVAL, ":3:1: unknown key \"webhok-port\"");
        expect_file_error("badvalue.yaml", "webhook-port: abc\n", CM_EINVAL,
                          ":1:15: webhook-port: invalid value \"abc\": expected an integer "
                          "between 0 and 65535");
        expect_file_error("badbool.yaml", "leader-elect: yes\n", CM_EINVAL,
                          ":1:15: leader-elect: invalid value \"yes\": expected true or false");
        expect_file_error("baddur.yaml", "\n\nsync-period: 5 minutes\n", CM_EINVAL,
                          ":3:14: sync-period: invalid value \"5 minutes\": expected a duration "
                          "between 1s and 168h, such as 90s or 1h30m");
        expect_file_error("seq.yaml", "namespace: [a, b]\n", CM_EINVAL,
                          ":1:12: namespace: expected a single value");
        expect_file_error("null.yaml", "namespace:\nv: 2\n", CM_EINVAL,
                          ":1:11: namespace: missing value");
        expect_file_error("dup.yaml", "v: 1\nv: 2\n", CM_EINVAL, ":2:1: duplicate key \"v\"");
        expect_file_error("cfgkey.yaml", "config: other.yaml\n", CM_EINVAL,
                          ":1:1: unknown key \"config\"");
        expect_file_error("help.yaml", "help: true\n", CM_EINVAL, ":1:1: unknown key \"help\"");
        expect_file_error("key.yaml", "maas-api-key: a:b:c\n", CM_EINVAL,
                          ":1:1: maas-api-key: not accepted in a file; use --maas-api-key-file "
                          "or $MAAS_API_KEY");
        expect_file_error("cplxkey.yaml", "[a]: 1\n", CM_EINVAL, ":1:1: expected an option name");
}

static void test_config__yaml_structure_errors(void **state)
{
        (void)state;
        expect_file_error("list.yaml", "- a\n- b\n", CM_EPARSE,
                          ":1:1: expected a mapping of option names to values");
        expect_file_error("scalar.yaml", "\nhello\n", CM_EPARSE,
                          ":2:1: expected a mapping of option names to values");
        expect_file_error("syntax.yaml", "webhook-port: 1\nnamespace: [a\n", CM_EPARSE,
                          ":3:1: invalid YAML: did not find expected ',' or ']' (while parsing "
                          "a flow sequence)");
        expect_file_error("indent.yaml", "v: 1\n  b: 2\n", CM_EPARSE,
                          ":2:4: invalid YAML: mapping values are not allowed in this context");
        expect_file_error("twodocs.yaml", "v: 1\n---\nv: 2\n", CM_EPARSE,
                          ":3:1: expected a single YAML document");
}

static void test_config__file_missing_or_too_big(void **state)
{
        char *missing = xasprintf("%s/nope.yaml", tmpdir);
        char *big = write_filler("big.yaml", (size_t)1024 * 1024 + 1);
        char *ok = write_filler("max.yaml", (size_t)1024 * 1024); /* a comment line at the limit */
        char *f1 = xasprintf("--config=%s", missing);
        char *f2 = xasprintf("--config=%s", big);
        char *f3 = xasprintf("--config=%s", ok);
        char *m1 = xasprintf("%s: No such file or directory", missing);
        char *m2 = xasprintf("%s: file is larger than 1048576 bytes", big);
        char *m3 = xasprintf("%s: not a regular file", tmpdir);
        char *f4 = xasprintf("--config=%s", tmpdir);
        struct config *c;

        (void)state;
        expect_error(ARGS(f1), NONE, CM_EIO, m1);
        expect_error(ARGS(f2), NONE, CM_ETOOBIG, m2);
        expect_error(ARGS(f4), NONE, CM_EIO, m3);
        c = load_ok(ARGS(f3), NONE);
        config_free(c);
        free(f4);
        free(m3);
        free(m2);
        free(m1);
        free(f3);
        free(f2);
        free(f1);
        free(ok);
        free(big);
        free(missing);
}

/* ---- help ---- */

static char *help_text(void)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        assert_non_null(f);
        config_print_help(f);
        assert_int_equal(fclose(f), 0);
        return text;
}

static void test_config__help_lists_every_option_with_env_and_default(void **state)
{
        static const char *const also[] = {
                "-h, --help",
                "--version",
                "--config FILE",
                "CAPMAAS_CONFIG",
                "MAAS_ENDPOINT",
                "MAAS_API_KEY",
                "MAAS_CA_CERT",
                "KUBECONFIG",
                "$POD_NAMESPACE",
                "\"capmaas-system\"",
                "9443",
                "120m",
                "VersionTLS12|VersionTLS13",
                "Kubernetes:",
                "Leader election:",
                "Controllers:",
                "Webhook server",
                "Listeners",
                "Logging:",
                "MAAS:",
                "-v LEVEL",
        };
        char *text = help_text();

        (void)state;
        for (size_t i = 0; i < N_OPTS; i++) {
                char *flag = xasprintf("%s%s", strlen(all_opts[i].name) == 1 ? "-" : "--",
                                       all_opts[i].name);
                char *env = env_name_of(all_opts[i].name);

                if (!strstr(text, flag) || !strstr(text, env))
                        fail_msg("help lacks %s or %s", flag, env);
                free(env);
                free(flag);
        }
        for (size_t i = 0; i < sizeof(also) / sizeof(also[0]); i++)
                if (!strstr(text, also[i]))
                        fail_msg("help lacks %s", also[i]);
        free(text);
}

static void test_config__help_never_shows_the_api_key(void **state)
{
        struct config *c = load_ok(NONE, ARGS("MAAS_API_KEY=ckvalue:tkvalue:tsvalue"));
        char *text = help_text();

        (void)state;
        assert_string_equal(c->maas_api_key, "ckvalue:tkvalue:tsvalue");
        assert_null(strstr(text, "ckvalue"));
        assert_null(strstr(text, "tsvalue"));
        free(text);
        config_free(c);
}

/* ---- the sample file ---- */

static void test_config__sample_file_loads(void **state)
{
        const char *src = getenv("CAPMAAS_SOURCE_DIR");
        char *flag;
        struct config *c;

        (void)state;
        if (!src)
                skip();
        flag = xasprintf("--config=%s/config/samples/capmaas.yaml", src);
        c = load_ok(ARGS(flag), NONE);
        assert_non_null(c->config_file);
        config_free(c);
        free(flag);
}

static void test_config__free_accepts_null(void **state)
{
        (void)state;
        assert_null(config_free(NULL));
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
                cmocka_unit_test(test_config__api_key_from_file),
                cmocka_unit_test(test_config__api_key_file_errors),
                cmocka_unit_test(test_config__malformed_api_key_is_rejected_without_echo),
                cmocka_unit_test(test_config__yaml_key_and_value_errors_carry_position),
                cmocka_unit_test(test_config__yaml_structure_errors),
                cmocka_unit_test(test_config__file_missing_or_too_big),
                cmocka_unit_test(test_config__help_lists_every_option_with_env_and_default),
                cmocka_unit_test(test_config__help_never_shows_the_api_key),
                cmocka_unit_test(test_config__sample_file_loads),
                cmocka_unit_test(test_config__free_accepts_null),
        };

        return cmocka_run_group_tests_name("config", tests, group_setup, group_teardown);
}
