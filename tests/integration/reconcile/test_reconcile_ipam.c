/*
 * The MaasMachine reconciler and Cluster API's IPAM contract (spec.addressesFromPools,
 * issue 19): the claim is created before anything is allocated, found by owner after a
 * restart, its answer turned into the machine's address, and deleted only after the MAAS
 * machine was released. The test plays the IPAM provider itself (it answers or refuses
 * each claim) so each step can be held; capi-sim's stand-in is script.e2e_ipam's.
 * (reconcile_fixture.h: kube-sims, maas-sim and the provider over real loopback TLS/HTTP.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "maassim.h"
#include "reconcile_fixture.h"
#include "testutil.h"
#include "xalloc.h"

static const struct kube_resource CLAIMS = { "ipam.cluster.x-k8s.io", "v1beta2", "ipaddressclaims",
                                             "IPAddressClaim", true };
static const struct kube_resource ADDRESSES = { "ipam.cluster.x-k8s.io", "v1beta2", "ipaddresses",
                                                "IPAddress", true };

#define FROM_POOL                                                                   \
        "\"addressesFromPools\":[{\"apiGroup\":\"ipam.cluster.x-k8s.io\",\"kind\":" \
        "\"InClusterIPPool\",\"name\":\"cp-pool\"}]"

static void pool_machine(const char *cluster, const char *name)
{
        make_machine(cluster, name,
                     &(struct machine_spec){ .bootstrap = true, .extra_spec = FROM_POOL });
}

static bool pred_exists(const cJSON *o, const void *arg)
{
        (void)o;
        (void)arg;
        return true;
}

static bool pred_deleting(const cJSON *o, const void *arg)
{
        (void)arg;
        return json_at(o, "metadata.deletionTimestamp") != NULL;
}

/* "ip" of the STATIC link MAAS holds on machine sid, or NULL (malloc'd). */
static char *static_link(const char *sid)
{
        cJSON *m = maassim_machine(&RF.sim, sid);
        const cJSON *l;
        char *ip = NULL;

        cJSON_ArrayForEach (l, json_at(m, "links")) {
                const char *mode = json_at_str(l, "mode");

                if (!ip && mode && strcmp(mode, "static") == 0)
                        ip = xstrdup(OR(json_at_str(l, "ip_address"), ""));
        }
        cJSON_Delete(m);
        return ip;
}

static bool has_address(const cJSON *mm, const char *ip)
{
        const cJSON *a;

        cJSON_ArrayForEach (a, json_at(mm, "status.addresses")) {
                const char *v = json_at_str(a, "address");

                if (v && strcmp(v, ip) == 0)
                        return true;
        }
        return false;
}

/* The IPAM provider's answer: the IPAddress and the claim's status.addressRef. */
static void answer(const char *claim, const char *address, int prefix, const char *gateway)
{
        char body[256];

        cl_create(&ADDRESSES,
                  test_json("{\"apiVersion\":\"ipam.cluster.x-k8s.io/v1beta2\",\"kind\":"
                            "\"IPAddress\",\"metadata\":{\"name\":\"%s\"},\"spec\":{\"claimRef\":"
                            "{\"name\":\"%s\"},\"poolRef\":{\"apiGroup\":\"ipam.cluster.x-k8s.io\","
                            "\"kind\":\"InClusterIPPool\",\"name\":\"cp-pool\"},\"address\":"
                            "\"%s\",\"prefix\":%d,\"gateway\":\"%s\"}}",
                            claim, claim, address, prefix, gateway));
        (void)snprintf(body, sizeof(body), "{\"status\":{\"addressRef\":{\"name\":\"%s\"}}}",
                       claim);
        cl_patch(&CLAIMS, claim, "status", body);
}

/* Claimed before allocation, waiting with no MAAS call; the answer lets it deploy; the
 * condition and event name the address; a restart finds the claim by owner (no second). */
static void test_ipam__claim_comes_first_and_its_answer_lets_the_machine_deploy(void **state)
{
        const char *wait[] = { "IPAddressClaimed", "False", "WaitingForIPAddress" };
        const cJSON *ref;
        char uid[64], path[128], *ip;
        cJSON *claim, *mm;
        struct provider_settings s = test_settings();

        (void)state;
        free(ready_cluster("c1"));
        pool_machine("c1", "cp0");
        claim = cl_wait(&CLAIMS, "cp0-0", pred_exists, NULL);
        ref = json_at(claim, "metadata.ownerReferences");
        assert_int_equal(cJSON_GetArraySize(ref), 1);
        ref = cJSON_GetArrayItem(ref, 0);
        assert_str(json_at_str(ref, "kind"), "MaasMachine");
        assert_str(json_at_str(ref, "uid"), UID_OF(&KUBE_RES_MAASMACHINES, "cp0", uid));
        assert_true(cJSON_IsTrue(json_at(ref, "controller")));
        assert_true(cJSON_IsTrue(json_at(ref, "blockOwnerDeletion")));
        assert_str(json_at_str(claim, "spec.clusterName"), "c1");
        assert_str(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                           json_at(claim, "metadata.labels"), "cluster.x-k8s.io/cluster-name")),
                   "c1");
        assert_str(json_at_str(claim, "spec.poolRef.apiGroup"), "ipam.cluster.x-k8s.io");
        assert_str(json_at_str(claim, "spec.poolRef.kind"), "InClusterIPPool");
        assert_str(json_at_str(claim, "spec.poolRef.name"), "cp-pool");
        cJSON_Delete(claim);
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "cp0", pred_cond_reason, wait);
        assert_non_null(strstr(json_at_str(cl_condition(mm, "IPAddressClaimed"), "message"),
                               "IPAddressClaim cp0-0 from InClusterIPPool cp-pool"));
        assert_true(cl_cond_is(mm, "Ready", "False", NULL));
        cJSON_Delete(mm);
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 0);
        assert_int_equal(maas_in_use(), 0);

        /* a restart while waiting: the claim is found by owner, none is created again */
        RF.prov = provider_free(RF.prov);
        RF.metrics = metrics_free(RF.metrics);
        start_provider(&s);

        answer("cp0-0", "10.20.0.150", 24, "10.20.0.1");
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "cp0", pred_ready, NULL);
        assert_true(cl_cond_is(mm, "IPAddressClaimed", "True", "IPAddressClaimed"));
        assert_non_null(strstr(json_at_str(cl_condition(mm, "IPAddressClaimed"), "message"),
                               "10.20.0.150 (10.20.0.0/24) from InClusterIPPool cp-pool"));
        /* the network step applied it: a STATIC link in MAAS, the machine's address */
        assert_true(cl_cond_is(mm, "StaticIPApplied", "True", NULL));
        assert_true(has_address(mm, "10.20.0.150"));
        ip = static_link(json_at_str(mm, "spec.systemID"));
        assert_str(ip, "10.20.0.150");
        free(ip);
        cJSON_Delete(mm);
        wait_event("IPAddressClaimed");
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 1);
        (void)snprintf(path, sizeof(path), "/namespaces/%s/ipaddressclaims", CL.ns);
        assert_int_equal(
                kubesim_count_requests(
                        &CL.mgmt, &(struct kubesim_match){ .method = "POST", .path_suffix = path }),
                1);
        assert_int_equal(cl_count(&CLAIMS, NULL), 1);
}

/* A claim the IPAM provider refuses (Ready False) is IPAddressClaimFailed with its words,
 * and still nothing is allocated. */
static void test_ipam__refused_claim_is_reported(void **state)
{
        const char *failed[] = { "IPAddressClaimed", "False", "IPAddressClaimFailed" };
        cJSON *mm;

        (void)state;
        free(ready_cluster("c2"));
        pool_machine("c2", "cp0");
        cJSON_Delete(cl_wait(&CLAIMS, "cp0-0", pred_exists, NULL));
        cl_patch(&CLAIMS, "cp0-0", "status",
                 "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
                 "\"reason\":\"PoolNotReady\",\"message\":\"InClusterIPPool cp-pool not found\","
                 "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}");
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "cp0", pred_cond_reason, failed);
        assert_str(json_at_str(cl_condition(mm, "IPAddressClaimed"), "message"),
                   "IPAddressClaim cp0-0: PoolNotReady: InClusterIPPool cp-pool not found");
        cJSON_Delete(mm);
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 0);
}

/* An answer that is not an address (prefix 40 for IPv4) is refused before any allocation. */
static void test_ipam__unusable_answer_allocates_nothing(void **state)
{
        const char *failed[] = { "IPAddressClaimed", "False", "IPAddressClaimFailed" };
        cJSON *mm;

        (void)state;
        free(ready_cluster("c3"));
        pool_machine("c3", "cp0");
        cJSON_Delete(cl_wait(&CLAIMS, "cp0-0", pred_exists, NULL));
        answer("cp0-0", "10.20.0.151", 40, "10.20.0.1");
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "cp0", pred_cond_reason, failed);
        assert_str(json_at_str(cl_condition(mm, "IPAddressClaimed"), "message"),
                   "IPAddress cp0-0: spec.prefix is not a prefix length for 10.20.0.151");
        cJSON_Delete(mm);
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 0);
}

/* The claim is deleted only once the MAAS machine has been released. */
static void test_ipam__claim_goes_after_the_release(void **state)
{
        cJSON *claim;
        char *sid, *ip;

        (void)state;
        free(ready_cluster("c4"));
        pool_machine("c4", "w0");
        cJSON_Delete(cl_wait(&CLAIMS, "w0-0", pred_exists, NULL));
        /* the IPAM provider's finalizer, which the test lifts at the end */
        cl_patch(&CLAIMS, "w0-0", NULL, "{\"metadata\":{\"finalizers\":[\"test/hold\"]}}");
        answer("w0-0", "10.20.0.152", 24, "10.20.0.1");
        claim = cl_wait(&KUBE_RES_MAASMACHINES, "w0", pred_ready, NULL);
        sid = xstrdup(json_at_str(claim, "spec.systemID"));
        cJSON_Delete(claim);
        ip = static_link(sid);
        assert_str(ip, "10.20.0.152");
        free(ip);
        assert_int_equal(maas_count_requests("\"op\":\"release\""), 0);
        cl_delete(&KUBE_RES_MAASMACHINES, "w0");
        cJSON_Delete(cl_wait(&CLAIMS, "w0-0", pred_deleting, NULL));
        /* by then MAAS released the machine and no longer holds the address */
        assert_true(maas_count_requests("\"op\":\"release\"") >= 1);
        assert_int_equal(maas_in_use(), 0);
        assert_null(static_link(sid));
        cl_wait(&KUBE_RES_MAASMACHINES, "w0", NULL, NULL);
        cl_patch(&CLAIMS, "w0-0", NULL, "{\"metadata\":{\"finalizers\":null}}");
        cl_wait(&CLAIMS, "w0-0", NULL, NULL);
        free(sid);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_ipam__claim_comes_first_and_its_answer_lets_the_machine_deploy,
                        rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(test_ipam__refused_claim_is_reported, rf_setup,
                                                rf_teardown),
                cmocka_unit_test_setup_teardown(test_ipam__unusable_answer_allocates_nothing,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(test_ipam__claim_goes_after_the_release, rf_setup,
                                                rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
