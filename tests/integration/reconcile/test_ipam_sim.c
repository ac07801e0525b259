/*
 * capi-sim's IPAM stand-in (tests/sim/capi/ipam.c) against a kube-sim: what the in-cluster
 * IPAM provider does with IPAddressClaims an infrastructure provider creates. The test plays
 * the infrastructure provider: it creates pools and claims and reads the IPAddresses, claim
 * status and pool counts capi-sim writes (issue 19). Every test runs twice: capi-sim playing
 * Cluster API 1.11 (claims at v1beta2) and 1.10 (claims at v1beta1, with v1beta1 conditions).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clusters.h"
#include "json.h"
#include "kube_client.h"
#include "simproc.h"
#include "testutil.h"

static struct simproc capi;

/* The contract capi-sim plays in the running group, and the claim kinds at its version. */
static const char *contract = "v1beta2";
static struct kube_resource CLAIMS = { "ipam.cluster.x-k8s.io", "v1beta2", "ipaddressclaims",
                                       "IPAddressClaim", true };
static struct kube_resource ADDRESSES = { "ipam.cluster.x-k8s.io", "v1beta2", "ipaddresses",
                                          "IPAddress", true };
static const struct kube_resource POOLS = { "ipam.cluster.x-k8s.io", "v1alpha2", "inclusterippools",
                                            "InClusterIPPool", true };
static const struct kube_resource GPOOLS = { "ipam.cluster.x-k8s.io", "v1alpha2",
                                             "globalinclusterippools", "GlobalInClusterIPPool",
                                             false };

static int group_setup(void **state)
{
        (void)state;
        CLAIMS.version = contract;
        ADDRESSES.version = contract;
        if (clusters_setup() < 0)
                return -1;
        return simproc_start(&capi, "capi-sim",
                             (const char *const[]){ "--kubeconfig", CL.mgmt.kubeconfig,
                                                    "--workload-kubeconfig", CL.workload.kubeconfig,
                                                    "--capi-contract", contract, "--port", "0",
                                                    NULL });
}

static int group_teardown(void **state)
{
        int capi_status = capi.pid > 0 ? simproc_stop(&capi) : 0;

        (void)state;
        clusters_teardown();
        assert_int_equal(capi_status, 0);
        return 0;
}

static int setup(void **state)
{
        (void)state;
        clusters_new_namespace();
        cl_create(&KUBE_RES_CLUSTERS,
                  test_json("{\"apiVersion\":\"cluster.x-k8s.io/%s\",\"kind\":\"Cluster\","
                            "\"metadata\":{\"name\":\"c1\"},\"spec\":{}}",
                            contract));
        return 0;
}

/* --- objects ------------------------------------------------------------------------------- */

/* An InClusterIPPool; spec_extra: more spec members (may be ""). */
static void make_pool(const char *name, const char *addresses, const char *spec_extra)
{
        cl_create(&POOLS, test_json("{\"apiVersion\":\"ipam.cluster.x-k8s.io/v1alpha2\",\"kind\":"
                                    "\"InClusterIPPool\",\"metadata\":{\"name\":\"%s\"},\"spec\":{"
                                    "\"addresses\":%s,\"prefix\":24,\"gateway\":\"10.10.0.1\"%s}}",
                                    name, addresses, spec_extra));
}

static void make_claim_of(const char *name, const char *kind, const char *pool, const char *cluster)
{
        cl_create(&CLAIMS,
                  test_json("{\"apiVersion\":\"ipam.cluster.x-k8s.io/%s\",\"kind\":"
                            "\"IPAddressClaim\",\"metadata\":{\"name\":\"%s\",\"labels\":{"
                            "\"cluster.x-k8s.io/cluster-name\":\"%s\"}},\"spec\":{\"clusterName\":"
                            "\"%s\",\"poolRef\":{\"apiGroup\":\"ipam.cluster.x-k8s.io\",\"kind\":"
                            "\"%s\",\"name\":\"%s\"}}}",
                            contract, name, cluster, cluster, kind, pool));
}

static void make_claim(const char *name, const char *pool)
{
        make_claim_of(name, "InClusterIPPool", pool, "c1");
}

static bool pred_answered(const cJSON *o, const void *arg)
{
        (void)arg;
        return json_at_str(o, "status.addressRef.name") != NULL;
}

static bool pred_ready_reason(const cJSON *o, const void *arg)
{
        const char *const *want = arg; /* { status, reason } */

        return cl_cond_is(o, "Ready", want[0], want[1]);
}

/* The address claim name was answered with (malloc'd). */
static char *answered(const char *claim)
{
        cJSON *c = cl_wait(&CLAIMS, claim, pred_answered, NULL);
        cJSON *a = cl_get(&ADDRESSES, json_at_str(c, "status.addressRef.name"));
        char *ip;

        assert_non_null(a);
        ip = strdup(json_at_str(a, "spec.address"));
        cJSON_Delete(a);
        cJSON_Delete(c);
        return ip;
}

static const char *label(const cJSON *o, const char *key)
{
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(json_at(o, "metadata.labels"), key);

        return cJSON_IsString(x) ? x->valuestring : NULL;
}

static bool has_finalizer(const cJSON *o, const char *f)
{
        const cJSON *x;

        cJSON_ArrayForEach (x, json_at(o, "metadata.finalizers")) {
                if (cJSON_IsString(x) && strcmp(x->valuestring, f) == 0)
                        return true;
        }
        return false;
}

/* --- tests ---------------------------------------------------------------------------------- */

/* A claim of an existing pool gets an IPAddress named after it with the pool's first free
 * address, prefix and gateway, owned by the claim (controller) and the pool; the claim gets
 * the ReleaseAddress finalizer, status.addressRef and Ready True. */
static void test_ipam_sim__claim_gets_an_address_named_after_it(void **state)
{
        cJSON *a, *c;
        const cJSON *ref;
        int n = 0, ctl = 0;

        (void)state;
        make_pool("cp-pool", "[\"10.10.0.0-10.10.0.12\"]", "");
        make_claim("mm-a-0", "cp-pool");
        c = cl_wait(&CLAIMS, "mm-a-0", pred_answered, NULL);
        assert_str(json_at_str(c, "status.addressRef.name"), "mm-a-0");
        assert_true(cl_cond_is(c, "Ready", "True", NULL));
        if (strcmp(contract, "v1beta1") == 0) { /* CAPI's v1beta1 conditions, v1beta2 beside */
                assert_null(json_at(cl_condition(c, "Ready"), "reason"));
                assert_str(
                        json_at_str(cJSON_GetArrayItem(json_at(c, "status.v1beta2.conditions"), 0),
                                    "reason"),
                        "Ready");
        } else {
                assert_str(json_at_str(cl_condition(c, "Ready"), "reason"), "Ready");
        }
        assert_true(has_finalizer(c, "ipam.cluster.x-k8s.io/ReleaseAddress"));
        a = cl_get(&ADDRESSES, "mm-a-0");
        assert_non_null(a);
        /* 10.10.0.0 is the network address and .1 the gateway: .2 is the first free */
        assert_str(json_at_str(a, "spec.address"), "10.10.0.2");
        assert_int_equal((int)json_at(a, "spec.prefix")->valuedouble, 24);
        assert_str(json_at_str(a, "spec.gateway"), "10.10.0.1");
        assert_str(json_at_str(a, "spec.claimRef.name"), "mm-a-0");
        assert_str(json_at_str(a, "spec.poolRef.kind"), "InClusterIPPool");
        assert_str(json_at_str(a, "spec.poolRef.name"), "cp-pool");
        assert_str(label(a, "cluster.x-k8s.io/cluster-name"), "c1");
        assert_true(has_finalizer(a, "ipam.cluster.x-k8s.io/ProtectAddress"));
        cJSON_ArrayForEach (ref, json_at(a, "metadata.ownerReferences")) {
                n++;
                if (cJSON_IsTrue(json_at(ref, "controller"))) {
                        ctl++;
                        assert_str(json_at_str(ref, "kind"), "IPAddressClaim");
                        assert_str(json_at_str(ref, "uid"), json_at_str(c, "metadata.uid"));
                } else {
                        assert_str(json_at_str(ref, "kind"), "InClusterIPPool");
                        assert_true(cJSON_IsTrue(json_at(ref, "blockOwnerDeletion")));
                }
        }
        assert_int_equal(n, 2);
        assert_int_equal(ctl, 1);
        cJSON_Delete(a);
        cJSON_Delete(c);
}

static bool pred_pool_counts(const cJSON *o, const void *arg)
{
        const int *want = arg; /* { total, used, free } */
        const cJSON *t = json_at(o, "status.ipAddresses.total");
        const cJSON *u = json_at(o, "status.ipAddresses.used");
        const cJSON *f = json_at(o, "status.ipAddresses.free");

        return t && u && f && t->valueint == want[0] && u->valueint == want[1] &&
               f->valueint == want[2];
}

/* No address is handed out twice; excluded addresses are skipped; a full pool says so on the
 * claim; deleting a claim deletes its IPAddress and frees the address for the waiting one;
 * the pool counts its addresses. */
static void test_ipam_sim__addresses_are_never_handed_out_twice(void **state)
{
        const char *exhausted[] = { "False", "PoolExhausted" };
        char *a, *b, *c;
        cJSON *cl;

        (void)state;
        make_pool("small", "[\"10.10.0.10-10.10.0.12\"]",
                  ",\"excludedAddresses\":[\"10.10.0.11\"]");
        make_claim("a", "small");
        a = answered("a");
        make_claim("b", "small");
        b = answered("b");
        assert_string_equal(a, "10.10.0.10");
        assert_string_equal(b, "10.10.0.12");
        cJSON_Delete(cl_wait(&POOLS, "small", pred_pool_counts, (const int[]){ 2, 2, 0 }));
        make_claim("c", "small");
        cl = cl_wait(&CLAIMS, "c", pred_ready_reason, exhausted);
        assert_non_null(strstr(json_at_str(cl_condition(cl, "Ready"), "message"), "small"));
        assert_null(json_at(cl, "status.addressRef"));
        cJSON_Delete(cl);
        assert_null(cl_get(&ADDRESSES, "c"));
        cl_delete(&CLAIMS, "a");
        assert_null(cl_wait(&CLAIMS, "a", NULL, NULL));
        assert_null(cl_wait(&ADDRESSES, "a", NULL, NULL));
        c = answered("c");
        assert_string_equal(c, "10.10.0.10");
        cJSON_Delete(cl_wait(&POOLS, "small", pred_pool_counts, (const int[]){ 2, 2, 0 }));
        free(a);
        free(b);
        free(c);
}

/* A claim of a pool that does not exist gets Ready False naming the pool and no address;
 * once the pool is created the claim is answered. */
static void test_ipam_sim__missing_pool_is_reported_then_answered(void **state)
{
        const char *not_ready[] = { "False", "PoolNotReady" };
        cJSON *cl;
        char *ip;

        (void)state;
        make_claim("m", "later");
        cl = cl_wait(&CLAIMS, "m", pred_ready_reason, not_ready);
        assert_str(json_at_str(cl_condition(cl, "Ready"), "message"),
                   "InClusterIPPool later not found");
        cJSON_Delete(cl);
        assert_null(cl_get(&ADDRESSES, "m"));
        make_pool("later", "[\"10.10.0.64/30\"]", "");
        ip = answered("m");
        assert_string_equal(ip, "10.10.0.64"); /* a CIDR entry is a range; the /24 reserves .0 */
        free(ip);
}

/* A claim of another provider's pool kind is left alone (no finalizer, no address), while
 * the claim created after it is answered. */
static void test_ipam_sim__claims_of_other_pool_kinds_are_left_alone(void **state)
{
        cJSON *o;
        char *ip;

        (void)state;
        make_pool("p", "[\"10.10.0.20\"]", "");
        make_claim_of("foreign", "NetboxIPPool", "p", "c1");
        make_claim("mine", "p");
        ip = answered("mine");
        o = cl_get(&CLAIMS, "foreign");
        assert_non_null(o);
        assert_false(has_finalizer(o, "ipam.cluster.x-k8s.io/ReleaseAddress"));
        assert_null(json_at(o, "status"));
        cJSON_Delete(o);
        assert_null(cl_get(&ADDRESSES, "foreign"));
        free(ip);
}

/* A claim of a paused Cluster waits until it is unpaused. */
static void test_ipam_sim__paused_cluster_claims_wait(void **state)
{
        cJSON *o;
        char *ip, *ip2;

        (void)state;
        cl_create(&KUBE_RES_CLUSTERS,
                  test_json("{\"apiVersion\":\"cluster.x-k8s.io/%s\",\"kind\":\"Cluster\","
                            "\"metadata\":{\"name\":\"held\"},\"spec\":{\"paused\":true}}",
                            contract));
        make_pool("p", "[\"10.10.0.30-10.10.0.31\"]", "");
        make_claim_of("held-0", "InClusterIPPool", "p", "held");
        make_claim("free-0", "p");
        ip = answered("free-0");
        o = cl_get(&CLAIMS, "held-0");
        assert_false(has_finalizer(o, "ipam.cluster.x-k8s.io/ReleaseAddress"));
        cJSON_Delete(o);
        cl_patch(&KUBE_RES_CLUSTERS, "held", NULL, "{\"spec\":{\"paused\":false}}");
        ip2 = answered("held-0");
        assert_string_not_equal(ip, ip2);
        free(ip);
        free(ip2);
}

/* A GlobalInClusterIPPool serves claims of every namespace from one range. */
static void test_ipam_sim__global_pool_serves_every_namespace(void **state)
{
        char *a, *b;

        (void)state;
        cl_create(&GPOOLS,
                  test_json("{\"apiVersion\":\"ipam.cluster.x-k8s.io/v1alpha2\",\"kind\":"
                            "\"GlobalInClusterIPPool\",\"metadata\":{\"name\":\"g-%s\"},\"spec\":{"
                            "\"addresses\":[\"10.20.0.5-10.20.0.6\"],\"prefix\":24}}",
                            CL.ns));
        {
                char pool[40];

                (void)snprintf(pool, sizeof(pool), "g-%s", CL.ns);
                make_claim_of("x-0", "GlobalInClusterIPPool", pool, "c1");
                a = answered("x-0");
                setup(NULL); /* a second namespace with its own Cluster c1 */
                make_claim_of("x-0", "GlobalInClusterIPPool", pool, "c1");
                b = answered("x-0");
        }
        assert_string_equal(a, "10.20.0.5");
        assert_string_equal(b, "10.20.0.6");
        free(a);
        free(b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_ipam_sim__claim_gets_an_address_named_after_it, setup),
                cmocka_unit_test_setup(test_ipam_sim__addresses_are_never_handed_out_twice, setup),
                cmocka_unit_test_setup(test_ipam_sim__missing_pool_is_reported_then_answered,
                                       setup),
                cmocka_unit_test_setup(test_ipam_sim__claims_of_other_pool_kinds_are_left_alone,
                                       setup),
                cmocka_unit_test_setup(test_ipam_sim__paused_cluster_claims_wait, setup),
                cmocka_unit_test_setup(test_ipam_sim__global_pool_serves_every_namespace, setup),
        };

        int failed =
                cmocka_run_group_tests_name("capi-sim v1beta2", tests, group_setup, group_teardown);

        contract = "v1beta1";
        return failed +
               cmocka_run_group_tests_name("capi-sim v1beta1", tests, group_setup, group_teardown);
}
