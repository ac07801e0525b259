/*
 * config_fixture: what the config tests share: a scratch directory for YAML and key files
 * (made by the group setup, removed by the teardown) and config_load over literal argument
 * and environment lists.
 */
#include "config_fixture.h"

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

#include "err.h"
#include "xalloc.h"

char config_test_dir[CONFIG_TEST_DIR_MAX];

int config_test_group_setup(void **state)
{
        (void)state;
        snprintf(config_test_dir, sizeof(config_test_dir), "/tmp/capmaas-config-XXXXXX");
        return mkdtemp(config_test_dir) ? 0 : -1;
}

int config_test_group_teardown(void **state)
{
        DIR *d = opendir(config_test_dir);
        struct dirent *e;
        char *path;

        (void)state;
        if (!d)
                return -1;
        while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                path = xasprintf("%s/%s", config_test_dir, e->d_name);
                unlink(path);
                free(path);
        }
        closedir(d);
        return rmdir(config_test_dir);
}

/* Writes content to config_test_dir/name; returns the path (caller frees). */
char *config_test_write_file(const char *name, const char *content)
{
        char *path = xasprintf("%s/%s", config_test_dir, name);
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        assert_int_equal(fputs(content, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
        return path;
}

char *config_test_write_filler(const char *name, size_t size)
{
        char *data = xmalloc(size + 1);
        char *path;

        memset(data, '#', size);
        data[size] = '\0';
        path = config_test_write_file(name, data);
        free(data);
        return path;
}

/* A heap copy of a NULL-terminated list, optionally with first prepended. */
char **config_test_dupv(const char *first, const char *const *v, int *ret_n)
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

void config_test_freev(char **v)
{
        for (size_t i = 0; v[i]; i++)
                free(v[i]);
        free(v);
}

int config_test_load(const char *const *args,
                     const char *const *env,
                     struct config **ret,
                     char **reterr)
{
        int argc;
        char **argv = config_test_dupv("capmaas", args, &argc);
        char **envp = config_test_dupv(NULL, env, NULL);
        int r;

        *reterr = NULL;
        r = config_load(argc, argv, envp, ret, reterr);
        config_test_freev(argv);
        config_test_freev(envp);
        return r;
}

struct config *config_test_load_ok(const char *const *args, const char *const *env)
{
        struct config *c = NULL;
        char *err = NULL;

        if (config_test_load(args, env, &c, &err) < 0)
                fail_msg("config_load failed: %s", err);
        assert_null(err);
        assert_non_null(c);
        return c;
}

void config_test_expect_error(const char *const *args,
                              const char *const *env,
                              int rc,
                              const char *msg)
{
        struct config *c = NULL;
        char *err = NULL;

        assert_int_equal(config_test_load(args, env, &c, &err), rc);
        assert_null(c);
        assert_non_null(err);
        assert_string_equal(err, msg);
        free(err);
}

/* Loads a YAML text from a file and expects an error "<path><suffix>". */
void config_test_expect_file_error(const char *name, const char *yaml, int rc, const char *suffix)
{
        char *path = config_test_write_file(name, yaml);
        char *flag = xasprintf("--config=%s", path);
        char *msg = xasprintf("%s%s", path, suffix);

        config_test_expect_error(ARGS(flag), NONE, rc, msg);
        free(msg);
        free(flag);
        free(path);
}

const struct config_test_opt config_test_opts[] = {
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
        { "webhook-read-header-timeout", "2s" },
        { "webhook-max-connections-per-address", "32" },
        { "graceful-shutdown-timeout", "1m" },
        { "tls-cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256" },
        { "diagnostics-address", "127.0.0.1:18443" },
        { "insecure-diagnostics", "true" },
        { "metrics-bind-addr", "127.0.0.1:18080" },
        { "feature-gates", "MachinePool=true,ClusterTopology=false" },
        { "health-addr", "0" },
        { "v", "3" },
        { "logging-format", "text" },
        { "maas-endpoint", "http://maas.example:5240/MAAS" },
        { "maas-api-key-file", NULL },
        { "maas-ca-file", "/etc/maas/ca.crt" },
        { "maas-insecure-skip-verify", "true" },
        { "maas-timeout", "45s" },
        { "maas-api-qps", "0" },
        { "maas-api-burst", "7" },
        { "maas-inventory-interval", "2m" },
        { "maas-identity-cache-max", "16" },
        { "admission-maas-checks", "false" },
};

const size_t config_test_opts_n = sizeof(config_test_opts) / sizeof(config_test_opts[0]);

char *config_test_env_name(const char *flag)
{
        char *s = xasprintf("CAPMAAS_%s", flag);

        for (char *p = s; *p; p++)
                *p = (char)(*p == '-' ? '_' : toupper((unsigned char)*p));
        return s;
}
