/*
 * The MaasMachine reconciler with spec.staticIP (issue #19): the address linked STATIC in
 * MAAS between allocate and deploy, reported in status.addresses, undone before the delete
 * completes; an address another machine holds: the machine released, StaticIPApplied
 * False/StaticIPFailed with MAAS's message, a Warning event, the next allocation held back.
 * (reconcile_fixture.h: kube-sims, maas-sim and the provider over real loopback TLS/HTTP;
 * the test plays the CAPI core controllers.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "json.h"
#include "reconcile_fixture.h"
#include "testutil.h"
#include "xalloc.h"

#define RETRY_ANNOTATION "maas.infrastructure.cluster.x-k8s.io/static-ip-retry"
#define HOST_ANNOTATION  "maas.infrastructure.cluster.x-k8s.io/static-ip-host"

/* The MAAS links of machine sid as the sim's state dump lists them (a copy). */
static cJSON *links_of(const char *sid)
{
        cJSON *m = maassim_machine(&RF.sim, sid);
        cJSON *l = cJSON_Duplicate(json_at(m, "links"), true);

        cJSON_Delete(m);
        return l;
}

/* Every machine in MAAS has exactly its AUTO link: no STATIC link left anywhere. */
static bool every_link_auto(const void *arg)
{
        cJSON *st = maassim_call(&RF.sim, "GET", "state", NULL);
        const cJSON *m;
        bool ok = true;

        (void)arg;
        cJSON_ArrayForEach (m, json_at(st, "machines")) {
                const cJSON *l = json_at(m, "links");

                ok = ok && cJSON_GetArraySize(l) == 1 &&
                     strcmp(OR(json_at_str(cJSON_GetArrayItem(l, 0), "mode"), ""), "auto") == 0;
        }
        cJSON_Delete(st);
        return ok;
}

/* An annotation's value (its key has dots: no json_at path). */
static const char *annotation(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(json_at(o, "metadata.annotations"), key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool has_address(const cJSON *mm, const char *type, const char *ip)
{
        const cJSON *a;

        cJSON_ArrayForEach (a, json_at(mm, "status.addresses"))
                if (strcmp(OR(json_at_str(a, "type"), ""), type) == 0 &&
                    strcmp(OR(json_at_str(a, "address"), ""), ip) == 0)
                        return true;
        return false;
}

static void test_static_ip__lands_on_its_address_and_is_unlinked_on_delete(void **state)
{
        char *sid, want[128];
        cJSON *mm, *links;

        (void)state;
        free(ready_cluster("s1"));
        sid = ready_machine("s1", "cp0",
                            &(struct machine_spec){ .bootstrap = true,
                                                    .control_plane = false,
                                                    .extra_spec =
                                                            "\"staticIP\":{\"ip\":\"10.20.0.200\","
                                                            "\"cidr\":\"10.20.0.0/24\","
                                                            "\"gateway\":\"10.20.0.1\"}" });
        mm = cl_get(&KUBE_RES_MAASMACHINES, "cp0");
        assert_true(cl_cond_is(mm, "StaticIPApplied", "True", "StaticIPApplied"));
        assert_true(has_address(mm, "ExternalIP", "10.20.0.200"));
        assert_true(has_address(mm, "InternalIP", "10.20.0.200"));
        snprintf(want, sizeof(want), "%s 10.20.0.200 10.20.0.0/24 -", sid);
        assert_str(annotation(mm, HOST_ANNOTATION), want); /* all an undo needs */
        links = links_of(sid);
        assert_int_equal(cJSON_GetArraySize(links), 1); /* the AUTO link gave way */
        assert_str(json_at_str(cJSON_GetArrayItem(links, 0), "mode"), "static");
        assert_str(json_at_str(cJSON_GetArrayItem(links, 0), "ip_address"), "10.20.0.200");
        cJSON_Delete(links);
        wait_event("StaticIPApplied");
        assert_int_equal(events_with("StaticIPApplied"), 1);
        cJSON_Delete(mm);

        /* delete: released, and once Ready in MAAS the STATIC link comes off, AUTO back */
        cl_delete(&KUBE_RES_MAASMACHINES, "cp0");
        cl_wait(&KUBE_RES_MAASMACHINES, "cp0", NULL, NULL);
        assert_int_equal(maas_in_use(), 0);
        assert_true(every_link_auto(NULL));
        free(sid);
}

static bool one_in_use(const void *arg)
{
        (void)arg;
        return maas_in_use() == 1;
}

static bool retry_pending(const cJSON *o, const void *arg)
{
        (void)arg;
        return annotation(o, RETRY_ANNOTATION) &&
               cl_cond_is(o, "StaticIPApplied", "False", "StaticIPFailed");
}

static void test_static_ip__address_in_use_releases_and_backs_off(void **state)
{
        char *sid, *ip, msg[256];
        cJSON *mm;
        const char *retry;
        unsigned failures = 0;
        long long at = 0;

        (void)state;
        free(ready_cluster("s2"));
        sid = ready_machine("s2", "w0", &(struct machine_spec){ .bootstrap = true });
        mm = cl_get(&KUBE_RES_MAASMACHINES, "w0");
        ip = xstrdup(mm_external_ip(mm)); /* its AUTO address, held while it is deployed */
        cJSON_Delete(mm);
        snprintf(msg, sizeof(msg), "\"staticIP\":{\"ip\":\"%s\",\"cidr\":\"10.20.0.0/24\"}", ip);
        make_machine("s2", "w1", &(struct machine_spec){ .bootstrap = true, .extra_spec = msg });
        mm = cl_wait(&KUBE_RES_MAASMACHINES, "w1", retry_pending, NULL);
        snprintf(msg, sizeof(msg), "%s on the boot interface: IP address is already in use.", ip);
        assert_str(json_at_str(cl_condition(mm, "StaticIPApplied"), "message"), msg);
        assert_true(cl_cond_is(mm, "MachineDeployed", "False", "StaticIPFailed"));
        assert_null(json_at_str(mm, "spec.providerID")); /* the machine was given back */
        assert_null(annotation(mm, HOST_ANNOTATION));
        retry = annotation(mm, RETRY_ANNOTATION);
        assert_int_equal(sscanf(retry, "%u %lld", &failures, &at), 2);
        assert_int_equal(failures, 1);
        assert_true(at >= (long long)time(NULL) + 5); /* 10 s after the failure */
        wait_event("StaticIPFailed");
        /* no leaked allocation: only w0's machine is in use, and the refused one has its AUTO
         * link back */
        assert_true(cl_eventually(one_in_use, NULL)); /* the refused one finishes releasing */
        assert_int_equal(maas_count_requests("\"op\":\"allocate\""), 2);
        assert_int_equal(maas_count_requests("\"op\":\"deploy\""), 1);
        cJSON_Delete(mm);
        free(ip);
        free(sid);
        cl_delete(&KUBE_RES_MAASMACHINES, "w0");
        cl_wait(&KUBE_RES_MAASMACHINES, "w0", NULL, NULL);
        assert_true(cl_eventually(every_link_auto, NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_static_ip__lands_on_its_address_and_is_unlinked_on_delete, rf_setup,
                        rf_teardown),
                cmocka_unit_test_setup_teardown(
                        test_static_ip__address_in_use_releases_and_backs_off, rf_setup,
                        rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
