/*
 * Unit tests for the options a Cluster API provider's manifests pass: --feature-gates (as
 * component-base parses them: CAPI's gates accepted and recorded, an unknown one refused
 * by name), --tls-cipher-suites (Go/IANA names to GnuTLS priority items, unknown and RC4
 * names refused by name), and the diagnostics address with its defaults beside the
 * deprecated --metrics-bind-addr.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "config_fixture.h"
#include "err.h"
#include "xalloc.h"

#define GATE(g) (1u << (g))

static bool gate_on(const struct config *c, enum feature_gate g)
{
        return (c->feature_gates.set & GATE(g)) && (c->feature_gates.enabled & GATE(g));
}

/* ---- feature gates ---- */

static void test_config_capi__feature_gates_of_capi_manifests_are_recorded(void **state)
{
        struct config *c;
        char *s;

        (void)state;
        c = config_test_load_ok(ARGS("--feature-gates=MachinePool=true,ClusterTopology=false"),
                                NONE);
        assert_true(gate_on(c, FEATURE_MACHINE_POOL));
        assert_true(c->feature_gates.set & GATE(FEATURE_CLUSTER_TOPOLOGY));
        assert_false(gate_on(c, FEATURE_CLUSTER_TOPOLOGY));
        assert_false(c->feature_gates.set & GATE(FEATURE_RUNTIME_SDK));
        s = config_feature_gates_format(&c->feature_gates);
        assert_string_equal(s, "MachinePool=true,ClusterTopology=false");
        free(s);
        config_free(c);
        /* "--flag value", spaces around items, every gate CAPI defines, AllAlpha/AllBeta */
        c = config_test_load_ok(
                ARGS("--feature-gates",
                     " MachinePool=true , ClusterResourceSet=true,RuntimeSDK=false,"
                     "KubeadmBootstrapFormatIgnition=true,MachineSetPreflightChecks=true,"
                     "MachineWaitForVolumeDetachConsiderVolumeAttachments=true,"
                     "PriorityQueue=false,ReconcilerRateLimiting=true,InPlaceUpdates=false,"
                     "MachineTaintPropagation=true,AllAlpha=false,AllBeta=true,"),
                NONE);
        assert_int_equal(c->feature_gates.set,
                         GATE(FEATURE_GATE_COUNT) - 1 - GATE(FEATURE_CLUSTER_TOPOLOGY));
        assert_true(gate_on(c, FEATURE_ALL_BETA));
        assert_false(gate_on(c, FEATURE_ALL_ALPHA));
        config_free(c);
        c = config_test_load_ok(NONE, NONE);
        assert_int_equal(c->feature_gates.set, 0);
        s = config_feature_gates_format(&c->feature_gates);
        assert_string_equal(s, "");
        free(s);
        config_free(c);
}

static void test_config_capi__feature_gates_merge_across_sources(void **state)
{
        char *path = config_test_write_file(
                "gates.yaml", "feature-gates: \"MachinePool=false,RuntimeSDK=true\"\n");
        char *flag = xasprintf("--config=%s", path);
        struct config *c;

        (void)state;
        /* the file, then the environment, then the flags (repeated: later keys win) */
        c = config_test_load_ok(
                ARGS(flag, "--feature-gates=MachinePool=true",
                     "--feature-gates=PriorityQueue=true,MachinePool=false"),
                ARGS("CAPMAAS_FEATURE_GATES=ClusterTopology=true,RuntimeSDK=false"));
        assert_false(gate_on(c, FEATURE_MACHINE_POOL));
        assert_true(gate_on(c, FEATURE_CLUSTER_TOPOLOGY));
        assert_true(gate_on(c, FEATURE_PRIORITY_QUEUE));
        assert_true(c->feature_gates.set & GATE(FEATURE_RUNTIME_SDK));
        assert_false(gate_on(c, FEATURE_RUNTIME_SDK));
        config_free(c);
        free(flag);
        free(path);
}

static void test_config_capi__feature_gate_errors_name_the_gate(void **state)
{
        (void)state;
        config_test_expect_error(ARGS("--feature-gates=MachinePool=true,NoSuchGate=true"), NONE,
                                 CM_EINVAL,
                                 "--feature-gates: unrecognized feature gate: NoSuchGate");
        config_test_expect_error(ARGS("--feature-gates=machinepool=true"), NONE, CM_EINVAL,
                                 "--feature-gates: unrecognized feature gate: machinepool");
        config_test_expect_error(ARGS("--feature-gates=MachinePool"), NONE, CM_EINVAL,
                                 "--feature-gates: missing bool value for MachinePool");
        config_test_expect_error(ARGS("--feature-gates=MachinePool=maybe"), NONE, CM_EINVAL,
                                 "--feature-gates: invalid value of MachinePool=maybe: expected "
                                 "true or false");
        config_test_expect_error(NONE, ARGS("CAPMAAS_FEATURE_GATES=Foo=true"), CM_EINVAL,
                                 "$CAPMAAS_FEATURE_GATES: unrecognized feature gate: Foo");
        config_test_expect_error(ARGS("--feature-gates"), NONE, CM_EINVAL,
                                 "--feature-gates: missing value");
}

/* ---- cipher suites ---- */

static void expect_priorities(const char *list, const char *want)
{
        char *flag = xasprintf("--tls-cipher-suites=%s", list);
        struct config *c = config_test_load_ok(ARGS(flag), NONE);
        char *got = config_tls_cipher_priorities(&c->tls_cipher_suites);

        if (!want)
                assert_null(got);
        else
                assert_string_equal(got, want);
        free(got);
        config_free(c);
        free(flag);
}

static void test_config_capi__cipher_suites_become_gnutls_priorities(void **state)
{
        (void)state;
        expect_priorities("", NULL);
        expect_priorities("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
                          ":-KX-ALL:-CIPHER-ALL:-MAC-ALL:+ECDHE-ECDSA:+AES-256-GCM:+AEAD");
        /* parts appear once, in the order of the list */
        expect_priorities("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
                          "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "
                          "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_RSA_WITH_AES_128_CBC_SHA256",
                          ":-KX-ALL:-CIPHER-ALL:-MAC-ALL:+ECDHE-RSA:+ECDHE-ECDSA:+RSA"
                          ":+AES-128-GCM:+CHACHA20-POLY1305:+AES-128-CBC:+AEAD:+SHA256");
        /* a TLS 1.3 name brings its cipher only */
        expect_priorities("TLS_AES_128_GCM_SHA256",
                          ":-KX-ALL:-CIPHER-ALL:-MAC-ALL:+AES-128-GCM:+AEAD");
}

static void test_config_capi__cipher_suite_errors_name_the_suite(void **state)
{
        (void)state;
        config_test_expect_error(ARGS("--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_NOPE"), NONE,
                                 CM_EINVAL,
                                 "--tls-cipher-suites: unknown cipher suite TLS_NOPE (expected a "
                                 "Go/IANA name such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)");
        config_test_expect_error(ARGS("--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_RC4_128_SHA"),
                                 NONE, CM_EINVAL,
                                 "--tls-cipher-suites: cipher suite TLS_ECDHE_RSA_WITH_RC4_128_SHA "
                                 "is not supported: GnuTLS has no RC4");
        /* OpenSSL's names are not Go's */
        config_test_expect_error(ARGS("--tls-cipher-suites=ECDHE-RSA-AES128-GCM-SHA256"), NONE,
                                 CM_EINVAL,
                                 "--tls-cipher-suites: unknown cipher suite "
                                 "ECDHE-RSA-AES128-GCM-SHA256 (expected a Go/IANA name such as "
                                 "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)");
}

/* ---- diagnostics ---- */

static void test_config_capi__diagnostics_address_defaults(void **state)
{
        struct config *c;

        (void)state;
        c = config_test_load_ok(NONE, NONE);
        assert_string_equal(c->diagnostics_address, ":8443");
        assert_false(c->insecure_diagnostics);
        assert_string_equal(c->metrics_bind_addr, "0"); /* no plain-HTTP metrics */
        config_free(c);
        /* the reference provider's Deployment: kube-rbac-proxy holds :8443 in the pod */
        c = config_test_load_ok(ARGS("--metrics-bind-addr=127.0.0.1:8080", "--leader-elect"), NONE);
        assert_string_equal(c->diagnostics_address, "0");
        assert_string_equal(c->metrics_bind_addr, "127.0.0.1:8080");
        config_free(c);
        c = config_test_load_ok(
                ARGS("--metrics-bind-addr=127.0.0.1:8080", "--diagnostics-address=:9443"), NONE);
        assert_string_equal(c->diagnostics_address, ":9443");
        config_free(c);
        c = config_test_load_ok(
                ARGS("--diagnostics-address", "localhost:8080", "--insecure-diagnostics"), NONE);
        assert_string_equal(c->diagnostics_address, "localhost:8080");
        assert_true(c->insecure_diagnostics);
        config_free(c);
        config_test_expect_error(
                ARGS("--diagnostics-address=8443"), NONE, CM_EINVAL,
                "--diagnostics-address: invalid value \"8443\": expected HOST:PORT "
                "(such as :8443, 127.0.0.1:8443 or [::1]:8443), or 0 to disable");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_config_capi__feature_gates_of_capi_manifests_are_recorded),
                cmocka_unit_test(test_config_capi__feature_gates_merge_across_sources),
                cmocka_unit_test(test_config_capi__feature_gate_errors_name_the_gate),
                cmocka_unit_test(test_config_capi__cipher_suites_become_gnutls_priorities),
                cmocka_unit_test(test_config_capi__cipher_suite_errors_name_the_suite),
                cmocka_unit_test(test_config_capi__diagnostics_address_defaults),
        };

        return cmocka_run_group_tests(tests, config_test_group_setup, config_test_group_teardown);
}
