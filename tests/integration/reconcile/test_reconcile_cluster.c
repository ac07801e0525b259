/*
 * The MaasCluster reconciler: finalizer, the API endpoint DNS record and its life with
 * the control planes, readiness, deletion (upstream-capmaas.md R1-R5, beyond.md B1).
 * (reconcile_fixture.h: kube-sims, maas-sim and the provider over real loopback TLS/HTTP;
 * the test plays the CAPI core controllers.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "reconcile_fixture.h"
#include "testutil.h"
#include "xalloc.h"

/* --- MaasCluster -------------------------------------------------------------------------- */

/* R1, R2: finalizer, DNS record with TTL 10 named <cluster>-<6 hex>.<domain>, endpoint,
 * ready and provisioned; an unowned MaasCluster is left alone. */
static void test_cluster__endpoint_record_and_ready(void **state)
{
        cJSON *mc, *lone;
        const char *host;
        char want[64];

        (void)state;
        cl_create(&KUBE_RES_MAASCLUSTERS,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                            "\"MaasCluster\",\"metadata\":{\"name\":\"lonely\"},\"spec\":{"
                            "\"dnsDomain\":"
                            "\"maas\"}}"));
        make_cluster("c1", true);
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "c1", pred_ready, NULL);
        host = json_at_str(mc, "spec.controlPlaneEndpoint.host");
        assert_non_null(host);
        assert_int_equal(strlen(host), strlen("c1-abcdef.maas"));
        snprintf(want, sizeof(want), "%.3s", host);
        assert_string_equal(want, "c1-");
        assert_string_equal(host + 9, ".maas");
        assert_true(cJSON_IsTrue(json_at(mc, "status.initialization.provisioned")));
        assert_int_equal((int)json_at(mc, "spec.controlPlaneEndpoint.port")->valuedouble, 6443);
        assert_true(cl_cond_is(mc, "LoadBalancerReady", "True", "LoadBalancerReady"));
        assert_string_equal(json_at_str(mc, "status.network.dnsName"), host);
        assert_string_equal(cJSON_GetArrayItem(json_at(mc, "metadata.finalizers"), 0)->valuestring,
                            "maascluster.infrastructure.cluster.x-k8s.io");
        assert_string_equal(
                json_at_str(cJSON_GetArrayItem(json_at(mc, "status.failureDomains"), 1), "name"),
                "az2");
        assert_true(record_has(host, NULL));
        assert_int_equal(n_records(), 1);
        /* no <cluster>-kubeconfig Secret yet: the API server cannot be reached */
        assert_true(cl_cond_is(mc, "APIServerAvailable", "False", "APIServerNotReady"));
        assert_true(cl_cond_is(mc, "Ready", "False", NULL));
        lone = cl_get(&KUBE_RES_MAASCLUSTERS, "lonely");
        assert_null(json_at(lone, "metadata.finalizers"));
        assert_null(json_at(lone, "status"));
        cJSON_Delete(lone);
        cJSON_Delete(mc);
}

/* R3, R4, R5, B1: the record follows the control planes; a deleting control plane waits
 * for its IP to leave the record before release; the cluster waits for its machines, then
 * deletes the record. MAAS ends as it was found. */
static void test_cluster__record_follows_control_planes_and_is_deleted(void **state)
{
        char *host = ready_cluster("c2");
        char *sid = ready_machine(
                "c2", "cp0", &(struct machine_spec){ .control_plane = true, .bootstrap = true });
        cJSON *node = maassim_machine(&RF.sim, sid), *mm;
        const char *ip = json_at_str(cJSON_GetArrayItem(json_at(node, "ips"), 0), "");
        const char *tr[] = { "DNSAttached", "True", "DNSAttached" };

        (void)state;
        (void)ip;
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "cp0", pred_cond_reason, tr);
        assert_true(cJSON_IsTrue(json_at(mm, "status.dnsAttached")));
        assert_non_null(mm_external_ip(mm));
        assert_true(record_has(host, mm_external_ip(mm)));
        cJSON_Delete(mm);
        cl_delete(&KUBE_RES_MAASCLUSTERS, "c2");
        cl_sleep_ms(300);
        mm = cl_get(&KUBE_RES_MAASCLUSTERS, "c2");
        assert_non_null(mm); /* held by its finalizer while cp0 exists */
        cJSON_Delete(mm);
        cl_delete(&KUBE_RES_MAASMACHINES, "cp0");
        cl_wait(&KUBE_RES_MAASMACHINES, "cp0", NULL, NULL);
        cl_wait(&KUBE_RES_MAASCLUSTERS, "c2", NULL, NULL);
        assert_int_equal(n_records(), 0);
        assert_true(events_with("SuccessfulRelease") >= 1);
        for (unsigned t = 0; t < 5000 && maas_in_use() > 0; t += 50)
                cl_sleep_ms(50);
        assert_int_equal(maas_in_use(), 0);
        cJSON_Delete(node);
        free(sid);
        free(host);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_cluster__endpoint_record_and_ready, rf_setup,
                                                rf_teardown),
                cmocka_unit_test_setup_teardown(
                        test_cluster__record_follows_control_planes_and_is_deleted, rf_setup,
                        rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
