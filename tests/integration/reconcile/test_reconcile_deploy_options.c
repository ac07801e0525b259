/*
 * The MaasMachine reconciler with the deploy and allocation options (issue #21 item 2,
 * docs/deploy-options.md): each option reaches MAAS as its parameter, as maas-sim's request
 * log shows it (allocate arch, storage, not_tags; set_storage_layout on the picked machine
 * while it is Ready, before the allocate that asks for it by system_id; deploy hwe_kernel
 * and ephemeral_deploy), and MAAS's refusal of a kernel it lacks is the machine's condition,
 * with one machine released and the next try after the deploy backoff.
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

#define ALL_OPTIONS                                                                      \
        "\"hweKernel\":\"ga-22.04\",\"deployInMemory\":true,\"architecture\":\"amd64\"," \
        "\"minDiskSize\":300,\"excludeTags\":[\"gpu\"],"                                 \
        "\"storageLayout\":{\"type\":\"lvm\",\"rootSize\":\"40G\",\"vgName\":\"vg0\"}"

/* The index of the first request in the log at or after from with this op and system ID
 * in its path (NULL = any), whose params contain every needle; -1 when none. */
static int find_request(
        const cJSON *reqs, int from, const char *op, const char *sid, const char *const *needles)
{
        for (int i = from; i < cJSON_GetArraySize(reqs); i++) {
                const cJSON *e = cJSON_GetArrayItem(reqs, i);
                const char *params = OR(json_at_str(e, "params"), "");
                bool ok = strcmp(OR(json_at_str(e, "op"), ""), op) == 0 &&
                          (!sid || strstr(OR(json_at_str(e, "path"), ""), sid));

                for (size_t k = 0; ok && needles[k]; k++)
                        ok = strstr(params, needles[k]) != NULL;
                if (ok)
                        return i;
        }
        return -1;
}

static void test_deploy_options__each_reaches_maas_as_its_parameter(void **state)
{
        static const char *const alloc[] = { "arch=amd64", "storage=300", "not_tags=gpu", NULL };
        static const char *const dry[] = { "arch=amd64", "storage=300", "not_tags=gpu",
                                           "dry_run=true", NULL };
        static const char *const layout[] = { "storage_layout=lvm", "root_size=40G", "vg_name=vg0",
                                              NULL };
        static const char *const deploy[] = { "hwe_kernel=ga-22.04", "ephemeral_deploy=true",
                                              NULL };
        char *sid, pinned[64];
        cJSON *log, *m;
        const cJSON *reqs;
        int d, l, a;

        (void)state;
        free(ready_cluster("o1"));
        sid = ready_machine("o1", "w0",
                            &(struct machine_spec){ .bootstrap = true, .extra_spec = ALL_OPTIONS });
        log = maassim_call(&RF.sim, "GET", "requests", NULL);
        reqs = json_at(log, "requests");
        d = find_request(reqs, 0, "allocate", NULL, dry);
        assert_true(d >= 0); /* the pick: a dry run with every constraint */
        l = find_request(reqs, d, "set_storage_layout", sid, layout);
        assert_true(l > d); /* on the picked machine, while it is Ready */
        snprintf(pinned, sizeof(pinned), "system_id=%s", sid);
        a = find_request(reqs, l, "allocate", NULL,
                         (const char *const[]){ alloc[0], alloc[1], alloc[2], pinned, NULL });
        assert_true(a > l); /* then allocated by its system ID */
        assert_true(find_request(reqs, a, "deploy", sid, deploy) > a);
        cJSON_Delete(log);

        m = maassim_machine(&RF.sim, sid);
        assert_str(json_at_str(m, "storage_layout"),
                   "storage_layout=lvm root_size=40G vg_name=vg0");
        assert_str(json_at_str(m, "hwe_kernel"), "ga-22.04");
        assert_true(cJSON_IsTrue(json_at(m, "ephemeral_deploy")));
        cJSON_Delete(m);
        free(sid);
}

static int count_ops(const cJSON *reqs, const char *op, const char *sid)
{
        int n = 0;

        for (int i = 0; (i = find_request(reqs, i, op, sid, (const char *const[]){ NULL })) >= 0;
             i++)
                n++;
        return n;
}

/* A pass that ends between the layout and the allocate (the allocate answered 500, as a
 * process killed there leaves it: MAAS did nothing) leaves a Ready machine with the layout;
 * the next pass picks it again, applies the layout again and allocates it: one machine, its
 * layout as asked, nothing else touched. */
static void test_deploy_options__a_pass_lost_after_the_layout_applies_it_again(void **state)
{
        char *sid;
        cJSON *log, *st, *m;
        const cJSON *e;
        int in_use = 0;

        (void)state;
        free(ready_cluster("o3"));
        maassim_faults(&RF.sim, "{\"fail_next\":{\"count\":1,\"status\":500,"
                                "\"op\":\"machines.allocate\",\"after\":1}}");
        sid = ready_machine("o3", "w0",
                            &(struct machine_spec){ .bootstrap = true,
                                                    .extra_spec =
                                                            "\"storageLayout\":{\"type\":\"flat\","
                                                            "\"rootSize\":\"50%\"}" });
        log = maassim_call(&RF.sim, "GET", "requests", NULL);
        assert_int_equal(count_ops(json_at(log, "requests"), "set_storage_layout", sid), 2);
        cJSON_Delete(log);
        m = maassim_machine(&RF.sim, sid);
        assert_str(json_at_str(m, "storage_layout"), "storage_layout=flat root_size=50%");
        cJSON_Delete(m);
        st = maassim_call(&RF.sim, "GET", "state", NULL);
        cJSON_ArrayForEach (e, json_at(st, "machines"))
                in_use += strcmp(OR(json_at_str(e, "status_name"), ""), "Ready") != 0;
        assert_int_equal(in_use, 1); /* no second machine for it */
        cJSON_Delete(st);
        free(sid);
}

static bool kernel_refused(const cJSON *o, const void *arg)
{
        const char *msg = json_at_str(cl_condition(o, "MachineDeployed"), "message");

        (void)arg;
        return msg && strstr(msg, "hwe-99.04 is not available for ubuntu/jammy");
}

static void test_deploy_options__a_kernel_maas_lacks_is_the_condition(void **state)
{
        cJSON *mm;

        (void)state;
        free(ready_cluster("o2"));
        make_machine("o2", "w0",
                     &(struct machine_spec){ .bootstrap = true,
                                             .extra_spec = "\"hweKernel\":\"hwe-99.04\"" });
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "w0", kernel_refused, NULL);
        assert_true(cl_cond_is(mm, "MachineDeployed", "False", "MachineDeployFailed"));
        cJSON_Delete(mm);
        wait_event("MachineDeployFailed");
        /* one machine taken and released, then the backoff: not one a pass until none is
         * free (each pass's status write brings the next) */
        cl_sleep_ms(1500);
        assert_int_equal(maas_count_requests("hwe_kernel=hwe-99.04"), 1);
        assert_int_equal(maas_count_requests("\"op\":\"release\""), 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_deploy_options__each_reaches_maas_as_its_parameter, rf_setup,
                        rf_teardown),
                cmocka_unit_test_setup_teardown(
                        test_deploy_options__a_kernel_maas_lacks_is_the_condition, rf_setup,
                        rf_teardown),
                cmocka_unit_test_setup_teardown(
                        test_deploy_options__a_pass_lost_after_the_layout_applies_it_again,
                        rf_setup, rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
