/*
 * The MaasMachine reconciler on the happy path: waiting for infrastructure and bootstrap
 * data, allocate and deploy with constraints, the Node's providerID and zone, adoption after
 * a lost write, delete-for-move (upstream-capmaas.md R6-R13, beyond.md B2).
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

/* --- MaasMachine --------------------------------------------------------------------------- */

/* R6, R7: no MAAS call before the cluster infrastructure and the bootstrap data exist. */
static void test_machine__waits_for_infrastructure_and_bootstrap_data(void **state)
{
        const char *infra[] = { "MachineDeployed", "False", "WaitingForClusterInfrastructure" };
        const char *boot[] = { "MachineDeployed", "False", "WaitingForBootstrapData" };
        cJSON *mm;

        (void)state;
        make_cluster("c3", false);
        make_kubeconfig_secret("c3");
        make_machine("c3", "w0", &(struct machine_spec){ .bootstrap = false });
        cJSON_Delete(cl_wait(&KUBE_RES_MAASMACHINES, "w0", pred_cond_reason, infra));
        cl_patch(&KUBE_RES_CLUSTERS, "c3", "status",
                 "{\"status\":{\"infrastructureReady\":true,\"initialization\":"
                 "{\"infrastructureProvisioned\":true}}}");
        cJSON_Delete(cl_wait(&KUBE_RES_MAASMACHINES, "w0", pred_cond_reason, boot));
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 0);
        /* capmaas_maasmachines: waiting without a MAAS machine is pending */
        wait_metric("capmaas_maasmachines{phase=\"pending\"} 1");
        wait_metric("capmaas_maasmachines{phase=\"ready\"} 0");
        cl_patch(&KUBE_RES_MACHINES, "w0", NULL,
                 "{\"spec\":{\"bootstrap\":{\"dataSecretName\":\"w0-bootstrap\"}}}");
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "w0", pred_ready, NULL);
        assert_true(cl_cond_is(mm, "MachineDeployed", "True", "MachineDeployed"));
        wait_metric("capmaas_maasmachines{phase=\"ready\"} 1");
        wait_metric("capmaas_maasmachines{phase=\"pending\"} 0");
        wait_metric("capmaas_maasmachines{phase=\"deploying\"} 0");
        cJSON_Delete(mm);
}

/* R8, R11 (Deployed), R13, B2: allocate with every constraint and our stamp, providerID
 * persisted, swap off, deploy with the bootstrap data; ready; the Node gets the providerID. */
static void test_machine__deploys_with_constraints_and_sets_node_provider_id(void **state)
{
        char *sid, pid[128], uid[64], *text;
        cJSON *mm, *node, *wnode;

        (void)state;
        free(ready_cluster("c4"));
        sid = ready_machine(
                "c4", "w1",
                &(struct machine_spec){ .bootstrap = true,
                                        .extra_spec = "\"resourcePool\":\"capi\","
                                                      "\"tags\":[\"ssd\",\"control-plane\"]" });
        mm = cl_get(&KUBE_RES_MAASMACHINES, "w1");
        node = maassim_machine(&RF.sim, sid);
        /* every tag counts: the only capi machine with ssd AND control-plane */
        assert_string_equal(sid, "gfkk07");
        snprintf(pid, sizeof(pid), "maas:///%s/%s", json_at_str(node, "zone"), sid);
        assert_string_equal(json_at_str(mm, "spec.providerID"), pid);
        assert_string_equal(json_at_str(node, "status_name"), "Deployed");
        assert_string_equal(json_at_str(node, "pool"), "capi");
        assert_string_equal(json_at_str(node, "agent_name"),
                            UID_OF(&KUBE_RES_MAASMACHINES, "w1", uid));
        assert_string_equal(json_at_str(node, "owner_data.capmaas-machine"), "w1");
        assert_string_equal(json_at_str(node, "osystem"), "ubuntu");
        assert_string_equal(json_at_str(node, "distro_series"), "jammy");
        assert_non_null(json_at_str(node, "user_data"));
        assert_string_equal(json_at_str(mm, "status.machineState"), "Deployed");
        assert_true(cJSON_IsTrue(json_at(mm, "status.initialization.provisioned")));
        wnode = wait_node_provider_id(json_at_str(node, "hostname"));
        assert_string_equal(json_at_str(wnode, "spec.providerID"), pid);
        /* the MAAS zone as the topology zone: spread constraints work without a cloud
         * controller */
        assert_non_null(node_zone_label(wnode));
        assert_string_equal(node_zone_label(wnode), json_at_str(node, "zone"));
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 1);
        text = render_metrics();
        assert_non_null(
                strstr(text, "capmaas_maas_requests_total{op=\"allocate\",code=\"200\"} 1"));
        assert_non_null(strstr(text, "capmaas_maas_requests_total{op=\"deploy\",code=\"200\"} 1"));
        assert_non_null(strstr(text, "capmaas_machine_phase_seconds_count{phase=\"deploying\"} 1"));
        assert_non_null(
                strstr(text, "controller_runtime_reconcile_total{controller=\"maasmachine\""));
        free(text);
        cJSON_Delete(wnode);
        cJSON_Delete(node);
        cJSON_Delete(mm);
        free(sid);
}

/* A zone label the Node already carries (the kubelet's --node-labels, a cloud controller,
 * the user) stands; the providerID is set all the same. */
static void test_machine__node_keeps_its_own_zone_label(void **state)
{
        struct maas_node_list l = { 0 };
        char *sid, pid[128];
        cJSON *node, *wnode;

        (void)state;
        assert_int_equal(maas_list_machines(RF.maas, NULL, &l, NULL), 0);
        for (size_t i = 0; i < l.n; i++)
                assert_int_equal(
                        kube_patch(
                                CL.wl,
                                &(struct kube_patch_opts){
                                        .resource = &KUBE_RES_NODES,
                                        .ns = NULL,
                                        .name = l.items[i].hostname,
                                        .subresource = NULL,
                                        .type = KUBE_PATCH_MERGE,
                                        .body = "{\"metadata\":{\"labels\":{"
                                                "\"topology.kubernetes.io/zone\":\"rack-7\"}}}" },
                                NULL, NULL),
                        0);
        maas_node_list_release(&l);
        free(ready_cluster("c12"));
        sid = ready_machine("c12", "w1", &(struct machine_spec){ .bootstrap = true });
        node = maassim_machine(&RF.sim, sid);
        snprintf(pid, sizeof(pid), "maas:///%s/%s", json_at_str(node, "zone"), sid);
        wnode = wait_node_provider_id(json_at_str(node, "hostname"));
        assert_string_equal(json_at_str(wnode, "spec.providerID"), pid);
        assert_string_equal(node_zone_label(wnode), "rack-7");
        cJSON_Delete(wnode);
        cJSON_Delete(node);
        free(sid);
}

/* B2: the providerID write is lost after allocate (kube-sim rejects it) → the next pass
 * adopts the stamped machine instead of allocating a second one. */
static void test_machine__adopts_stamped_machine_after_lost_write(void **state)
{
        const char *boot[] = { "MachineDeployed", "False", "WaitingForBootstrapData" };
        char *sid;
        cJSON *mm, *node;

        (void)state;
        free(ready_cluster("c5"));
        make_machine("c5", "w2", &(struct machine_spec){ .bootstrap = false });
        cJSON_Delete(cl_wait(&KUBE_RES_MAASMACHINES, "w2", pred_cond_reason, boot));
        kubesim_faults(&CL.mgmt,
                       "{\"failNext\":{\"method\":\"PATCH\",\"pathContains\":\"/maasmachines/w2\","
                       "\"count\":2}}");
        cl_patch(&KUBE_RES_MACHINES, "w2", NULL,
                 "{\"spec\":{\"bootstrap\":{\"dataSecretName\":\"w2-bootstrap\"}}}");
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "w2", pred_ready, NULL);
        sid = xstrdup(json_at_str(mm, "spec.systemID"));
        node = maassim_machine(&RF.sim, sid);
        assert_string_equal(json_at_str(node, "status_name"), "Deployed");
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 1);
        assert_int_equal(maas_in_use(), 1);
        cJSON_Delete(node);
        cJSON_Delete(mm);
        free(sid);
}

/* B3, R9: a machine whose deploy fails in MAAS is released and replaced by another. */

/* clusterctl move: delete-for-move removes the finalizer and releases nothing. */
static void test_machine__delete_for_move_releases_nothing(void **state)
{
        char *sid;
        cJSON *node;

        (void)state;
        free(ready_cluster("c8"));
        sid = ready_machine("c8", "w4", &(struct machine_spec){ .bootstrap = true });
        cl_patch(&KUBE_RES_MAASMACHINES, "w4", NULL,
                 "{\"metadata\":{\"annotations\":{\"clusterctl.cluster.x-k8s.io/"
                 "delete-for-move\":\"\"}}}");
        wait_metric("capmaas_maasmachines{phase=\"ready\"} 1");
        cl_delete(&KUBE_RES_MAASMACHINES, "w4");
        cl_wait(&KUBE_RES_MAASMACHINES, "w4", NULL, NULL);
        /* gone from the cache: counted in no phase any more */
        wait_metric("capmaas_maasmachines{phase=\"ready\"} 0");
        wait_metric("capmaas_maasmachines{phase=\"deleting\"} 0");
        node = maassim_machine(&RF.sim, sid);
        assert_string_equal(json_at_str(node, "status_name"), "Deployed");
        assert_int_equal(maas_count_requests("\"op\":\"release\""), 0);
        cJSON_Delete(node);
        free(sid);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_machine__waits_for_infrastructure_and_bootstrap_data, rf_setup,
                        rf_teardown),
                cmocka_unit_test_setup_teardown(
                        test_machine__deploys_with_constraints_and_sets_node_provider_id, rf_setup,
                        rf_teardown),
                cmocka_unit_test_setup_teardown(test_machine__node_keeps_its_own_zone_label,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(
                        test_machine__adopts_stamped_machine_after_lost_write, rf_setup,
                        rf_teardown),
                cmocka_unit_test_setup_teardown(test_machine__delete_for_move_releases_nothing,
                                                rf_setup, rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
