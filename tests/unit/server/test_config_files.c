/*
 * Unit tests for config's files: the API key file, the YAML file's errors and limits,
 * --help and the sample file. Files are written to a mkdtemp directory that the group
 * teardown removes.
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

/* ---- API key ---- */

static void test_config__api_key_from_file(void **state)
{
        char *crlf = config_test_write_file("crlf.key", "ck:tk:ts\r\n");
        char *envkey = config_test_write_file("env.key", "e1:e2:e3\n");
        char *flag = xasprintf("--maas-api-key-file=%s", crlf);
        char *var = xasprintf("CAPMAAS_MAAS_API_KEY_FILE=%s", envkey);
        struct config *c;

        (void)state;
        c = config_test_load_ok(ARGS(flag), ARGS("MAAS_API_KEY=x1:x2:x3"));
        assert_string_equal(c->maas_api_key, "ck:tk:ts");
        config_free(c);
        /* at the same level (environment) the file wins over the value */
        c = config_test_load_ok(NONE, ARGS(var, "MAAS_API_KEY=x1:x2:x3"));
        assert_string_equal(c->maas_api_key, "e1:e2:e3");
        config_free(c);
        free(var);
        free(flag);
        free(envkey);
        free(crlf);
}

/* --<flag>=<path> fails with err and the message "<prefix><path>: <why>". */
static void expect_path_error(
        const char *flag, const char *path, int err, const char *prefix, const char *why)
{
        char *arg = xasprintf("%s=%s", flag, path);
        char *msg = xasprintf("%s%s: %s", prefix, path, why);

        config_test_expect_error(ARGS(arg), NONE, err, msg);
        free(msg);
        free(arg);
}

static void test_config__api_key_file_errors(void **state)
{
        static const char flag[] = "--maas-api-key-file";
        static const char prefix[] = "--maas-api-key-file: ";
        char *empty = config_test_write_file("empty.key", "\n");
        char *big = config_test_write_filler("big.key", 4097);
        char *missing = xasprintf("%s/missing.key", config_test_dir);

        (void)state;
        expect_path_error(flag, empty, CM_EINVAL, prefix,
                          "expected one line holding the MAAS API key");
        expect_path_error(flag, big, CM_ETOOBIG, prefix, "file is larger than 4096 bytes");
        expect_path_error(flag, missing, CM_EIO, prefix, "No such file or directory");
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
                config_test_expect_error(
                        NONE, ARGS(bad[i]), CM_EINVAL,
                        "MAAS API key: expected consumer_key:token_key:token_secret");
}

/* ---- YAML errors ---- */

/* A file that fails to load with rc, and the end of the message (after the path). */
struct file_error {
        const char *name;
        const char *yaml;
        int rc;
        const char *suffix;
};

static void expect_file_errors(const struct file_error *t, size_t n)
{
        for (size_t i = 0; i < n; i++)
                config_test_expect_file_error(t[i].name, t[i].yaml, t[i].rc, t[i].suffix);
}

static const struct file_error key_and_value_errors[] = {
        { "unknown.yaml", "# comment\nwebhook-port: 9443\nwebhok-port: 1\n", CM_EINVAL,
          ":3:1: unknown key \"webhok-port\"" },
        { "badvalue.yaml", "webhook-port: abc\n", CM_EINVAL,
          ":1:15: webhook-port: invalid value \"abc\": expected an integer "
          "between 0 and 65535" },
        { "badbool.yaml", "leader-elect: yes\n", CM_EINVAL,
          ":1:15: leader-elect: invalid value \"yes\": expected true or false" },
        { "baddur.yaml", "\n\nsync-period: 5 minutes\n", CM_EINVAL,
          ":3:14: sync-period: invalid value \"5 minutes\": expected a duration "
          "between 1s and 168h, such as 90s or 1h30m" },
        { "seq.yaml", "namespace: [a, b]\n", CM_EINVAL,
          ":1:12: namespace: expected a single value" },
        { "null.yaml", "namespace:\nv: 2\n", CM_EINVAL, ":1:11: namespace: missing value" },
        { "dup.yaml", "v: 1\nv: 2\n", CM_EINVAL, ":2:1: duplicate key \"v\"" },
        { "cfgkey.yaml", "config: other.yaml\n", CM_EINVAL, ":1:1: unknown key \"config\"" },
        { "help.yaml", "help: true\n", CM_EINVAL, ":1:1: unknown key \"help\"" },
        { "key.yaml", "maas-api-key: a:b:c\n", CM_EINVAL,
          ":1:1: maas-api-key: not accepted in a file; use --maas-api-key-file "
          "or $MAAS_API_KEY" },
        { "cplxkey.yaml", "[a]: 1\n", CM_EINVAL, ":1:1: expected an option name" },
};

static void test_config__yaml_key_and_value_errors_carry_position(void **state)
{
        (void)state;
        expect_file_errors(key_and_value_errors, ARRAY_SIZE(key_and_value_errors));
}

static const struct file_error structure_errors[] = {
        { "list.yaml", "- a\n- b\n", CM_EPARSE,
          ":1:1: expected a mapping of option names to values" },
        { "scalar.yaml", "\nhello\n", CM_EPARSE,
          ":2:1: expected a mapping of option names to values" },
        { "syntax.yaml", "webhook-port: 1\nnamespace: [a\n", CM_EPARSE,
          ":3:1: invalid YAML: did not find expected ',' or ']' (while parsing "
          "a flow sequence)" },
        { "indent.yaml", "v: 1\n  b: 2\n", CM_EPARSE,
          ":2:4: invalid YAML: mapping values are not allowed in this context" },
        { "twodocs.yaml", "v: 1\n---\nv: 2\n", CM_EPARSE, ":3:1: expected a single YAML document" },
};

static void test_config__yaml_structure_errors(void **state)
{
        (void)state;
        expect_file_errors(structure_errors, ARRAY_SIZE(structure_errors));
}

static void test_config__file_missing_or_too_big(void **state)
{
        char *missing = xasprintf("%s/nope.yaml", config_test_dir);
        char *big = config_test_write_filler("big.yaml", (size_t)1024 * 1024 + 1);
        char *ok = config_test_write_filler("max.yaml",
                                            (size_t)1024 * 1024); /* a comment line at the limit */
        char *f3 = xasprintf("--config=%s", ok);
        struct config *c;

        (void)state;
        expect_path_error("--config", missing, CM_EIO, "", "No such file or directory");
        expect_path_error("--config", big, CM_ETOOBIG, "", "file is larger than 1048576 bytes");
        expect_path_error("--config", config_test_dir, CM_EIO, "", "not a regular file");
        c = config_test_load_ok(ARGS(f3), NONE);
        config_free(c);
        free(f3);
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
        for (size_t i = 0; i < config_test_opts_n; i++) {
                char *flag = xasprintf("%s%s", strlen(config_test_opts[i].name) == 1 ? "-" : "--",
                                       config_test_opts[i].name);
                char *env = config_test_env_name(config_test_opts[i].name);

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
        struct config *c = config_test_load_ok(NONE, ARGS("MAAS_API_KEY=ckvalue:tkvalue:tsvalue"));
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
        c = config_test_load_ok(ARGS(flag), NONE);
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

        return cmocka_run_group_tests_name("config_files", tests, config_test_group_setup,
                                           config_test_group_teardown);
}
