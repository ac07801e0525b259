/*
 * The IPAM step's edges over the fake Kubernetes API (reconcile_world.h): which version of
 * ipam.cluster.x-k8s.io is read, and a MaasMachine with addressesFromPools on a management
 * cluster that does not serve the IPAM contract (no Cluster API IPAM CRDs). The claim's life
 * against real peers is integration.reconcile_ipam and script.e2e_ipam.
 */
#include "../../../reconcile/maasmachine.h"
#include "reconcile_world.h"

#define MM_URL      INFRA_API "/maasmachines/m1"
#define MACHINE_URL CAPI_API "/machines/m1"
#define CLUSTER_URL CAPI_API "/clusters/c1"
#define BOOT_URL    CORE_API "/secrets/m1-bootstrap"
#define IPAM_URL    MGMT "/apis/ipam.cluster.x-k8s.io"

/* The APIGroup document serving versions (a JSON list of version strings). */
static void put_ipam_group(struct world *w, const char *v1, const char *v2)
{
        world_put(w, NULL, IPAM_URL,
                  test_json("{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",\"name\":"
                            "\"ipam.cluster.x-k8s.io\",\"versions\":[{\"groupVersion\":"
                            "\"ipam.cluster.x-k8s.io/%s\",\"version\":\"%s\"}%s%s%s%s%s],"
                            "\"preferredVersion\":{\"groupVersion\":\"ipam.cluster.x-k8s.io/%s\","
                            "\"version\":\"%s\"}}",
                            v1, v1, v2 ? ",{\"groupVersion\":\"ipam.cluster.x-k8s.io/" : "",
                            v2 ? v2 : "", v2 ? "\",\"version\":\"" : "", v2 ? v2 : "",
                            v2 ? "\"}" : "", v1, v1));
}

static int discover(struct world *w, struct capi_ipam_api *a)
{
        struct kube_client *c = NULL;
        int err;

        assert_int_equal(kube_client_new(&(struct kube_client_opts){ .config = &w->kube_cfg,
                                                                     .transport = &w->kube.t },
                                         &c),
                         0);
        err = capi_ipam_discover(a, c, NULL);
        kube_client_free(c);
        return err;
}

/* v1beta2 (CAPI 1.11+) is read when served, even when the server prefers v1beta1; v1beta1
 * alone (CAPI 1.10) is read as v1beta1; v1alpha1 alone is refused; no group is "not served". */
static void test_ipam_version_is_discovered(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        struct capi_ipam_api a;

        (void)state;
        assert_int_equal(discover(w, &a), CM_ENOTFOUND);
        assert_false(capi_ipam_known(&a));
        put_ipam_group(w, "v1beta1", "v1beta2");
        assert_int_equal(discover(w, &a), 0);
        assert_string_equal(a.version, "v1beta2");
        assert_string_equal(a.claims.version, "v1beta2");
        assert_string_equal(a.claims.plural, "ipaddressclaims");
        assert_string_equal(a.addresses.plural, "ipaddresses");
        put_ipam_group(w, "v1beta1", NULL);
        assert_int_equal(discover(w, &a), 0);
        assert_string_equal(a.addresses.version, "v1beta1");
        put_ipam_group(w, "v1alpha1", NULL);
        assert_int_equal(discover(w, &a), CM_EUNSUPPORTED);
        assert_false(capi_ipam_known(&a));
        world_free(w);
}

static void put_pool_machine(struct world *w)
{
        world_put(w, w->p->clusters, CLUSTER_URL, world_cluster(&(struct world_cluster){ 0 }));
        world_put(w, w->p->machines, MACHINE_URL,
                  world_machine(&(struct world_machine){
                          .name = "m1", .control_plane = true, .data_secret = "m1-bootstrap" }));
        world_put(w, NULL, BOOT_URL,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"m1-bootstrap\",\"namespace\":\"" NS "\"},\"data\":{\"value\":"
                            "\"I2Nsb3VkLWNvbmZpZwo=\"}}"));
        world_put(w, w->p->maasmachines, MM_URL,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"m1\",\"namespace\":"
                            "\"" NS "\",\"uid\":\"uid-m1\",\"generation\":1,\"labels\":{"
                            "\"cluster.x-k8s.io/cluster-name\":\"c1\","
                            "\"cluster.x-k8s.io/"
                            "control-plane\":\"\"},\"finalizers\":[\"" SCHEMA_FINALIZER_MACHINE
                            "\"],\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"Machine\",\"name\":\"m1\",\"uid\":\"uid-machine\"}]},"
                            "\"spec\":{\"image\":\"ubuntu/jammy\",\"addressesFromPools\":[{"
                            "\"apiGroup\":\"ipam.cluster.x-k8s.io\",\"kind\":\"InClusterIPPool\","
                            "\"name\":\"cp-pool\"}]}}"));
}

/* Without the IPAM CRDs the MaasMachine says so and takes nothing from MAAS, instead of
 * waiting for an answer that cannot come or deploying without its address. */
static void test_ipam_not_served_is_refused_without_maas_calls(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        const cJSON *mm;
        const char *msg;

        (void)state;
        assert_null(w->p->ipclaims); /* world_new: the fake serves no IPAM group */
        put_pool_machine(w);
        w->rc = maasmachine_reconcile(w->w, NS, "m1", &w->res);
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_int_equal(requests(&w->kube, "POST", "ipaddressclaims", NULL), 0);
        mm = world_get(w, MM_URL);
        assert_string_equal(condition(mm, SCHEMA_COND_IPADDRESS_CLAIMED, "status"), "False");
        assert_string_equal(condition(mm, SCHEMA_COND_IPADDRESS_CLAIMED, "reason"),
                            SCHEMA_REASON_IPADDRESS_CLAIM_FAILED);
        msg = condition(mm, SCHEMA_COND_IPADDRESS_CLAIMED, "message");
        assert_non_null(msg);
        assert_non_null(strstr(msg, "does not serve ipam.cluster.x-k8s.io"));
        assert_string_equal(condition(mm, SCHEMA_COND_READY, "status"), "False");
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(w->res.after_ms, 30000);
        world_free(w);
}

/* Served, but our RBAC may not list the claims (the reference provider's RBAC, or an older
 * release's, with this image): the controllers still start (no claims informer that would
 * never sync) and such a MaasMachine is told to apply this release's RBAC. Allowed, the
 * claims are read. */
static void test_ipam_forbidden_claims_are_refused_with_the_fix(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        const char *msg;

        (void)state;
        put_ipam_group(w, "v1beta2", NULL);
        w->kube.forbid = MGMT "/apis/ipam.cluster.x-k8s.io/v1beta2/ipaddressclaims";
        assert_int_equal(provider_discover(w->p, &w->kube.t), 0);
        assert_true(w->p->ipam_forbidden);
        assert_false(capi_ipam_known(&w->p->ipam));
        put_pool_machine(w);
        w->rc = maasmachine_reconcile(w->w, NS, "m1", &w->res);
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        msg = condition(world_get(w, MM_URL), SCHEMA_COND_IPADDRESS_CLAIMED, "message");
        assert_non_null(msg);
        assert_non_null(strstr(msg, "may not list ipam.cluster.x-k8s.io ipaddressclaims: apply "
                                    "this release's RBAC"));
        w->kube.forbid = NULL;
        world_put(w, NULL, MGMT "/apis/ipam.cluster.x-k8s.io/v1beta2/ipaddressclaims",
                  test_json("{\"kind\":\"IPAddressClaimList\",\"apiVersion\":"
                            "\"ipam.cluster.x-k8s.io/v1beta2\",\"metadata\":{"
                            "\"resourceVersion\":\"1\"},\"items\":[]}"));
        assert_int_equal(provider_discover(w->p, &w->kube.t), 0);
        assert_false(w->p->ipam_forbidden);
        assert_string_equal(w->p->ipam.version, "v1beta2");
        world_free(w);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ipam_version_is_discovered),
                cmocka_unit_test(test_ipam_not_served_is_refused_without_maas_calls),
                cmocka_unit_test(test_ipam_forbidden_claims_are_refused_with_the_fix),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
