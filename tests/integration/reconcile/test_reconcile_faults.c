/*
 * The MaasMachine reconciler when things go wrong: a failed deployment, the power policy
 * with an unknown BMC, a paused cluster, a machine MAAS no longer has (beyond.md B3-B5, R16).
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

static void test_machine__failed_deployment_is_replaced(void **state)
{
        struct maas_node_list l = { 0 };
        const struct maas_node *cheapest = NULL;
        char body[256], *sid, *bad;
        cJSON *node;

        (void)state;
        assert_int_equal(
                maas_list_machines(RF.maas, &(struct maas_node_filter){ .pool = "capi" }, &l, NULL),
                0);
        for (size_t i = 0; i < l.n; i++) {
                double c = l.items[i].cpu_count + (double)l.items[i].memory_mib / 1024;

                if (!cheapest || c < cheapest->cpu_count + (double)cheapest->memory_mib / 1024)
                        cheapest = &l.items[i];
        }
        bad = xstrdup(cheapest ? cheapest->system_id : "none");
        maas_node_list_release(&l);
        snprintf(body, sizeof(body), "{\"fail_deploy\":[\"%s\"]}", bad);
        cJSON_Delete(maassim_call(&RF.sim, "POST", "faults", body));
        free(ready_cluster("c6"));
        sid = ready_machine("c6", "w3",
                            &(struct machine_spec){ .bootstrap = true,
                                                    .extra_spec = "\"resourcePool\":\"capi\"" });
        assert_string_not_equal(sid, bad);
        wait_event("MachineReplaced");
        /* counted as a deploy failure and a replacement; the other reasons stand at zero */
        wait_metric("capmaas_maas_deploy_failures_total{reason=\"DeployFailed\"} 1");
        wait_metric("capmaas_maas_deploy_failures_total{reason=\"DeployTimeout\"} 0");
        wait_metric("capmaas_maas_deploy_failures_total{reason=\"DeployRefused\"} 0");
        wait_metric("capmaas_machine_replacements_total{reason=\"DeployFailed\"} 1");
        wait_metric("capmaas_machine_replacements_total{reason=\"DeployTimeout\"} 0");
        node = maassim_machine(&RF.sim, bad);
        assert_true(strcmp(json_at_str(node, "status_name"), "Releasing") == 0 ||
                    strcmp(json_at_str(node, "status_name"), "Ready") == 0);
        assert_int_equal(
                maas_in_use() - (strcmp(json_at_str(node, "status_name"), "Releasing") == 0), 1);
        cJSON_Delete(node);
        free(sid);
        free(bad);
}

/* MAAS refuses the deploy call once: the machine is released (not leaked), the deploy
 * failure counted as refused, and the MaasMachine is deployed on its next try. */
static void test_machine__refused_deploy_is_counted_and_retried(void **state)
{
        char *sid;

        (void)state;
        wait_metric("capmaas_maas_deploy_failures_total{reason=\"DeployRefused\"} 0");
        cJSON_Delete(maassim_call(&RF.sim, "POST", "faults",
                                  "{\"fail_next\":{\"count\":1,\"status\":400,"
                                  "\"op\":\"machine.deploy\"}}"));
        free(ready_cluster("c9"));
        sid = ready_machine("c9", "w5", &(struct machine_spec){ .bootstrap = true });
        wait_event("MachineDeployFailed");
        assert_int_equal(maas_count_requests("\"op\":\"release\""), 1);
        wait_metric("capmaas_maas_deploy_failures_total{reason=\"DeployRefused\"} 1");
        wait_metric("capmaas_machine_replacements_total{reason=\"DeployFailed\"} 0");
        free(sid);
}

/* B4: an unknown BMC reading never powers a machine on; two confirmed offs power it on
 * exactly once. B5: while the only control plane looks off, the record keeps its IP. */
static void test_machine__power_policy_and_record_kept(void **state)
{
        char *host = ready_cluster("c7");
        char *sid = ready_machine(
                "c7", "cp1", &(struct machine_spec){ .control_plane = true, .bootstrap = true });
        const char *attached[] = { "DNSAttached", "True", "DNSAttached" };
        char body[256];
        cJSON *mm;
        char *ip;

        (void)state;
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "cp1", pred_cond_reason, attached);
        assert_non_null(mm_external_ip(mm));
        ip = xstrdup(mm_external_ip(mm));
        cJSON_Delete(mm);
        /* MAAS believes it is off, the BMC cannot confirm */
        snprintf(body, sizeof(body), "{\"bmc_unknown\":[\"%s\"],\"power_off\":[\"%s\"]}", sid, sid);
        cJSON_Delete(maassim_call(&RF.sim, "POST", "faults", body));
        provider_free(RF.prov); /* restart: the fleet snapshot must not hide the change */
        RF.prov = NULL;
        assert_int_equal(provider_new(&(struct provider_opts){ .settings = test_settings(),
                                                               .kube = &CL.mgmt.cfg,
                                                               .maas = &RF.mcfg },
                                      &RF.prov),
                         0);
        assert_int_equal(provider_start(RF.prov), 0);
        wait_event("PowerStateUnknown");
        assert_int_equal(maas_count_requests("\"op\":\"power_on\""), 0);
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "cp1", pred_unpowered, NULL);
        cJSON_Delete(mm);
        cl_patch(&KUBE_RES_MAASMACHINES, "cp1", NULL,
                 "{\"metadata\":{\"annotations\":{\"poke\":\"0\"}}}");
        cl_sleep_ms(500);                  /* let the cluster see the control plane down */
        assert_true(record_has(host, ip)); /* B5: never emptied by a power blip */
        snprintf(body, sizeof(body), "{\"clear\":true,\"power_off\":[\"%s\"]}", sid);
        cJSON_Delete(maassim_call(&RF.sim, "POST", "faults", body));
        cl_patch(&KUBE_RES_MAASMACHINES, "cp1", NULL,
                 "{\"metadata\":{\"annotations\":{\"poke\":\"1\"}}}");
        wait_event("MachinePoweredOn");
        assert_int_equal(maas_count_requests("\"op\":\"power_on\""), 1);
        assert_true(record_has(host, ip));
        free(ip);
        free(sid);
        free(host);
}

/* Passes of the MaasMachine reconciler so far (controller_runtime_reconcile_total). */
static double machine_reconciles(void)
{
        static const char series[] =
                "controller_runtime_reconcile_total{controller=\"maasmachine\"";
        char *text = render_metrics();
        double n = 0;

        for (const char *p = strstr(text, series); p; p = strstr(p + 1, series)) {
                const char *v = strchr(p, ' ');

                n += v ? strtod(v, NULL) : 0;
        }
        free(text);
        return n;
}

static bool machine_reconciled_since(const void *before)
{
        return machine_reconciles() > *(const double *)before;
}

/* R16: a paused cluster's machines are left untouched. */
static void test_machine__paused_cluster_is_left_alone(void **state)
{
        const char *paused[] = { "Paused", "True", "Paused" };
        double before;
        cJSON *mm;

        (void)state;
        free(ready_cluster("c9"));
        cl_patch(&KUBE_RES_CLUSTERS, "c9", NULL, "{\"spec\":{\"paused\":true}}");
        cl_sleep_ms(200); /* the provider's Cluster informer sees the pause */
        before = machine_reconciles();
        make_machine("c9", "w5", &(struct machine_spec){ .bootstrap = true });
        /* a negative check: once the reconciler has said it is paused (issue 17's Paused
         * condition, its only write), nothing else may have happened */
        assert_true(cl_eventually(machine_reconciled_since, &before));
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "w5", pred_cond_reason, paused);
        assert_null(json_at(mm, "metadata.finalizers"));
        assert_null(cl_condition(mm, "MachineDeployed"));
        assert_null(json_at(mm, "spec.providerID"));
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 0);
        cJSON_Delete(mm);
        cl_patch(&KUBE_RES_CLUSTERS, "c9", NULL, "{\"spec\":{\"paused\":false}}");
        cJSON_Delete(cl_wait(&KUBE_RES_MAASMACHINES, "w5", pred_ready, NULL));
}

/* §7.3 fixed: a providerID naming a machine MAAS no longer has is replaced, not wedged;
 * deleting such a MaasMachine does not wait (§7.10). */
static void test_machine__vanished_machine_is_replaced(void **state)
{
        cJSON *mm;

        (void)state;
        free(ready_cluster("c10"));
        make_machine("c10", "w6",
                     &(struct machine_spec){ .bootstrap = true,
                                             .extra_spec = "\"providerID\":\"maas:///az1/gone00\","
                                                           "\"systemID\":\"gone00\"" });
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "w6", pred_ready, NULL);
        assert_string_not_equal(json_at_str(mm, "spec.systemID"), "gone00");
        wait_event("MachineNotFound");
        cJSON_Delete(mm);
        cl_delete(&KUBE_RES_MAASMACHINES, "w6");
        cl_wait(&KUBE_RES_MAASMACHINES, "w6", NULL, NULL);
        wait_event("SuccessfulRelease"); /* the recorder writes events on its own thread */
}

/* The provider again, with a fresh metrics registry and machine_refresh_ms. */
static void restart_provider(uint64_t refresh_ms)
{
        struct provider_settings s = test_settings();

        RF.prov = provider_free(RF.prov);
        RF.metrics = metrics_free(RF.metrics);
        s.machine_refresh_ms = refresh_ms;
        start_provider(&s);
}

static void assert_metric(const char *series)
{
        char *text = render_metrics();

        if (!strstr(text, series))
                fail_msg("no %s in\n%s", series, text);
        free(text);
}

/* Issue 25: the host of a provisioned MaasMachine released, deleted or allocated to another
 * user behind capmaas's back is reported terminal (for Cluster API to replace the Machine),
 * never replaced under the same providerID; deleting those MaasMachines touches none of the
 * hosts. */
static void test_machine__lost_host_is_terminal_never_replaced(void **state)
{
        static const char *const names[] = { "w7", "w8", "w9" };
        const char *lost[] = { "MachineDeployed", "False", "MachineTerminatedReason" };
        char *sids[3], body[512];
        cJSON *mm, *node;

        (void)state;
        free(ready_cluster("c11"));
        for (size_t i = 0; i < 3; i++)
                sids[i] =
                        ready_machine("c11", names[i], &(struct machine_spec){ .bootstrap = true });
        restart_provider(500); /* steady machines are looked at every half second */
        cJSON_Delete(maassim_call(&RF.sim, "POST", "reset-log", ""));
        snprintf(body, sizeof(body),
                 "{\"release\":[\"%s\"],\"delete\":[\"%s\"],\"allocate_to\":{\"%s\":\"user2\"}}",
                 sids[0], sids[1], sids[2]);
        cJSON_Delete(maassim_call(&RF.sim, "POST", "faults", body));
        for (size_t i = 0; i < 3; i++) {
                mm = cl_wait(&KUBE_RES_MAASMACHINES, names[i], pred_cond_reason, lost);
                assert_string_equal(json_at_str(mm, "spec.systemID"), sids[i]);
                assert_string_equal(json_at_str(mm, "status.failureReason"), "UpdateError");
                assert_false(cJSON_IsTrue(json_at(mm, "status.ready")));
                assert_true(cl_cond_is(mm, "Ready", "False", "MachineTerminatedReason"));
                cJSON_Delete(mm);
        }
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 0);
        assert_int_equal(maas_count_requests("\"op\":\"deploy\""), 0);
        assert_int_equal(maas_count_requests("\"op\":\"release\""), 0);
        wait_event("MachineNotFound");
        wait_events("MachineUnexpectedTermination", 2);
        assert_metric("capmaas_maasmachine_host_lost_total{reason=\"Released\"} 1");
        assert_metric("capmaas_maasmachine_host_lost_total{reason=\"NotFound\"} 1");
        assert_metric("capmaas_maasmachine_host_lost_total{reason=\"OtherOwner\"} 1");
        for (size_t i = 0; i < 3; i++) {
                cl_delete(&KUBE_RES_MAASMACHINES, names[i]);
                cl_wait(&KUBE_RES_MAASMACHINES, names[i], NULL, NULL);
        }
        /* user2's machine is still user2's: nothing was released */
        assert_int_equal(maas_count_requests("\"op\":\"release\""), 0);
        node = maassim_machine(&RF.sim, sids[2]);
        assert_string_equal(json_at_str(node, "status_name"), "Allocated");
        assert_string_equal(json_at_str(node, "owner"), "user2");
        cJSON_Delete(node);
        for (size_t i = 0; i < 3; i++)
                free(sids[i]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_machine__failed_deployment_is_replaced,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(test_machine__power_policy_and_record_kept,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(test_machine__paused_cluster_is_left_alone,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(test_machine__refused_deploy_is_counted_and_retried,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(test_machine__vanished_machine_is_replaced,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(test_machine__lost_host_is_terminal_never_replaced,
                                                rf_setup, rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
