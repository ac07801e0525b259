/*
 * Unit tests for capi_objects: which Cluster API version the provider discovers (over the
 * fake API of reconcile_world.h) and how Cluster and Machine fields are read in each shape.
 */
#include "../../../reconcile/capi_objects.h"
#include "reconcile_world.h"

#define GROUP_URL MGMT "/apis/cluster.x-k8s.io"

/* --- discovery ---------------------------------------------------------------------------- */

struct discovery_row {
        const char *name;
        const char *versions; /* the APIGroup's versions, JSON; NULL = the group is not served */
        int want_rc;
        const char *want; /* the version read, when want_rc is 0 */
};

static void run_discovery(void **state)
{
        const struct discovery_row *row = *state;
        struct world *w = world_new(&(struct provider_settings){ 0 });

        if (row->versions)
                world_put(w, NULL, GROUP_URL,
                          test_json("{\"kind\":\"APIGroup\",\"name\":\"cluster.x-k8s.io\","
                                    "\"versions\":%s}",
                                    row->versions));
        else
                world_delete(w, GROUP_URL);
        w->p->capi = (struct capi_api){ 0 };
        assert_int_equal(provider_discover(w->p, &w->kube.t), row->want_rc);
        if (row->want_rc == 0) {
                assert_string_equal(w->p->capi.version, row->want);
                assert_string_equal(w->p->capi.clusters.version, row->want);
                assert_string_equal(w->p->capi.machines.version, row->want);
                assert_string_equal(w->p->capi.clusters.plural, "clusters");
        } else {
                assert_false(capi_api_known(&w->p->capi));
        }
        assert_int_equal(requests(&w->kube, "GET", GROUP_URL, NULL), 1);
        world_free(w);
}

static const struct discovery_row discovery_rows[] = {
        { "capi_1_11_serves_both_v1beta2_read",
          "[{\"version\":\"v1beta2\"},{\"version\":\"v1beta1\"}]", 0, CAPI_V1BETA2 },
        { "v1beta2_preferred_even_when_listed_second",
          "[{\"version\":\"v1beta1\"},{\"version\":\"v1beta2\"}]", 0, CAPI_V1BETA2 },
        { "capi_1_10_v1beta1_only", "[{\"version\":\"v1beta1\"}]", 0, CAPI_V1BETA1 },
        { "neither_version_unsupported", "[{\"version\":\"v1alpha4\"}]", CM_EUNSUPPORTED, NULL },
        { "no_versions_parse_error", "[]", CM_EPARSE, NULL },
        { "group_not_served_not_found", NULL, CM_ENOTFOUND, NULL },
};

/* --- readers ------------------------------------------------------------------------------- */

static struct capi_api api(const char *v)
{
        struct capi_api a;

        assert_int_equal(capi_api_set(&a, v), 0);
        return a;
}

static void test_capi__unknown_version_is_refused(void **state)
{
        struct capi_api a;

        (void)state;
        assert_int_equal(capi_api_set(&a, "v1alpha3"), CM_EUNSUPPORTED);
        assert_int_equal(capi_api_set(&a, NULL), CM_EUNSUPPORTED);
}

/* Each shape read by its own apiVersion, whatever was discovered (and by the discovered
 * version when the object carries none). */
static void test_capi__cluster_fields_in_both_shapes(void **state)
{
        const char *const versions[] = { CAPI_V1BETA2, CAPI_V1BETA1 };

        (void)state;
        for (size_t v = 0; v < ARRAY_SIZE(versions); v++) {
                struct capi_api a = api(versions[1 - v]);
                cJSON *c;

                world_capi = versions[v];
                c = world_cluster(&(struct world_cluster){ .control_plane_initialized = true,
                                                           .endpoint_host = "api.x" });
                assert_true(capi_cluster_infra_provisioned(&a, c));
                assert_true(capi_cluster_control_plane_initialized(&a, c));
                assert_false(capi_cluster_paused(c));
                assert_string_equal(capi_cluster_endpoint_host(c), "api.x");
                assert_string_equal(capi_ref_name(&a, c, "infrastructureRef", SCHEMA_GROUP,
                                                  SCHEMA_KIND_CLUSTER),
                                    "c1");
                assert_null(capi_ref_name(&a, c, "infrastructureRef", "infrastructure.other.io",
                                          SCHEMA_KIND_CLUSTER));
                assert_null(capi_ref_name(&a, c, "infrastructureRef", SCHEMA_GROUP, "Other"));
                assert_string_equal(capi_ref_name(&a, c, "controlPlaneRef",
                                                  "controlplane.cluster.x-k8s.io",
                                                  "KubeadmControlPlane"),
                                    "c1-control-plane");
                cJSON_Delete(c);
                c = world_cluster(
                        &(struct world_cluster){ .paused = true, .not_provisioned = true });
                assert_false(capi_cluster_infra_provisioned(&a, c));
                assert_false(capi_cluster_control_plane_initialized(&a, c));
                assert_true(capi_cluster_paused(c));
                assert_null(capi_cluster_endpoint_host(c));
                /* no apiVersion: the discovered version decides */
                cJSON_DeleteItemFromObjectCaseSensitive(c, "apiVersion");
                a = api(versions[v]);
                assert_false(capi_cluster_infra_provisioned(&a, c));
                cJSON_Delete(c);
        }
        world_capi = CAPI_V1BETA2;
}

static void test_capi__v1beta1_control_plane_initialized_condition(void **state)
{
        struct capi_api a = api(CAPI_V1BETA1);
        cJSON *c = test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"status\":{"
                             "\"controlPlaneReady\":false,\"conditions\":[{\"type\":"
                             "\"ControlPlaneInitialized\",\"status\":\"True\"}]}}");

        (void)state;
        assert_true(capi_cluster_control_plane_initialized(&a, c));
        cJSON_Delete(c);
}

static void test_capi__machine_fields_in_both_shapes(void **state)
{
        const char *const versions[] = { CAPI_V1BETA2, CAPI_V1BETA1 };

        (void)state;
        for (size_t v = 0; v < ARRAY_SIZE(versions); v++) {
                struct capi_api a = api(versions[v]);
                cJSON *m;

                world_capi = versions[v];
                m = world_machine(&(struct world_machine){ .name = "m1",
                                                           .control_plane = true,
                                                           .data_secret = "m1-boot",
                                                           .failure_domain = "az2",
                                                           .node = "node-7" });
                assert_string_equal(capi_machine_data_secret(m), "m1-boot");
                assert_string_equal(capi_machine_failure_domain(m), "az2");
                assert_string_equal(capi_machine_node_name(m), "node-7");
                assert_true(capi_is_control_plane(m));
                assert_string_equal(capi_ref_name(&a, m, "infrastructureRef", SCHEMA_GROUP,
                                                  SCHEMA_KIND_MACHINE),
                                    "m1");
                cJSON_Delete(m);
                m = world_machine(&(struct world_machine){ .name = "m2" });
                assert_null(capi_machine_data_secret(m));
                assert_null(capi_machine_failure_domain(m));
                assert_null(capi_machine_node_name(m));
                assert_false(capi_is_control_plane(m));
                cJSON_Delete(m);
        }
        world_capi = CAPI_V1BETA2;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_capi__unknown_version_is_refused),
                cmocka_unit_test(test_capi__cluster_fields_in_both_shapes),
                cmocka_unit_test(test_capi__v1beta1_control_plane_initialized_condition),
                cmocka_unit_test(test_capi__machine_fields_in_both_shapes),
        };
        struct CMUnitTest rows[ARRAY_SIZE(discovery_rows)];
        int ret;

        for (size_t i = 0; i < ARRAY_SIZE(discovery_rows); i++)
                rows[i] = (struct CMUnitTest){ .name = discovery_rows[i].name,
                                               .test_func = run_discovery,
                                               .initial_state =
                                                       (void *)(uintptr_t)&discovery_rows[i] };
        ret = cmocka_run_group_tests(tests, NULL, NULL);
        return ret + _cmocka_run_group_tests("discovery", rows, ARRAY_SIZE(rows), NULL, NULL);
}
