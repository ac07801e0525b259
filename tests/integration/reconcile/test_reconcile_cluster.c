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
        wait_event("SuccessfulRelease");
        for (unsigned t = 0; t < 5000 && maas_in_use() > 0; t += 50)
                cl_sleep_ms(50);
        assert_int_equal(maas_in_use(), 0);
        cJSON_Delete(node);
        free(sid);
        free(host);
}

/* --- the endpoint's addresses on multi-homed control planes (#19) -------------------------- */

/* Two machines in pool "mh", each on two networks: eth0 on the provisioning subnet
 * 10.20.0.0/24 (the first address MAAS lists, so the default rule's), eth1 on 10.30.0.0/24. */
static void add_multi_homed_machines(void)
{
        cJSON_Delete(maassim_call(&RF.sim, "POST", "pools", "[{\"name\":\"mh\"}]"));
        cJSON_Delete(maassim_call(
                &RF.sim, "POST", "machines",
                "[{\"system_id\":\"mh0001\",\"hostname\":\"mh-a\",\"cpu_count\":2,\"memory\":"
                "4096,\"zone\":\"az1\",\"pool\":\"mh\",\"interfaces\":["
                "{\"name\":\"eth0\",\"mac\":\"52:54:00:77:00:01\",\"ip\":\"10.20.0.201\","
                "\"cidr\":\"10.20.0.0/24\"},"
                "{\"name\":\"eth1\",\"mac\":\"52:54:00:77:01:01\",\"ip\":\"10.30.0.201\","
                "\"cidr\":\"10.30.0.0/24\"}]},"
                "{\"system_id\":\"mh0002\",\"hostname\":\"mh-b\",\"cpu_count\":2,\"memory\":"
                "4096,\"zone\":\"az2\",\"pool\":\"mh\",\"interfaces\":["
                "{\"name\":\"eth0\",\"mac\":\"52:54:00:77:00:02\",\"ip\":\"10.20.0.202\","
                "\"cidr\":\"10.20.0.0/24\"},"
                "{\"name\":\"eth1\",\"mac\":\"52:54:00:77:01:02\",\"ip\":\"10.30.0.202\","
                "\"cidr\":\"10.30.0.0/24\"}]}]"));
}

/* The record's addresses, sorted, space-separated ("" when none or no record). */
static char *record_ips(const char *fqdn)
{
        cJSON *st = maassim_call(&RF.sim, "GET", "state", NULL);
        const cJSON *d, *i;
        char *out = xstrdup("");

        cJSON_ArrayForEach (d, json_at(st, "dnsresources")) {
                if (strcmp(OR(json_at_str(d, "fqdn"), ""), fqdn) != 0)
                        continue;
                cJSON_ArrayForEach (i, json_at(d, "ips")) {
                        char *next = xasprintf("%s%s%s", out, *out ? " " : "",
                                               cJSON_IsString(i) ? i->valuestring : "?");

                        free(out);
                        out = next;
                }
        }
        cJSON_Delete(st);
        return out;
}

struct record_want {
        const char *fqdn;
        const char *ips; /* as record_ips prints them */
};

static bool record_is(const void *arg)
{
        const struct record_want *w = arg;
        char *have = record_ips(w->fqdn);
        bool ok = strcmp(have, w->ips) == 0;

        free(have);
        return ok;
}

static void wait_record(const char *fqdn, const char *ips)
{
        struct record_want w = { fqdn, ips };
        char *have;

        if (cl_eventually(record_is, &w))
                return;
        have = record_ips(fqdn);
        fail_msg("record %s holds \"%s\", want \"%s\"", fqdn, have, ips);
}

/* Multi-homed control planes: by default the record holds each one's first ExternalIP (the
 * provisioning network); with spec.dnsRecordAddresses.cidr it holds exactly their addresses
 * in that CIDR, though status.addresses lists both networks; with an interface as well, the
 * addresses MAAS links on that interface inside the CIDR. */
static void test_cluster__record_holds_the_chosen_network_only(void **state)
{
        const struct machine_spec cp = { .extra_spec = "\"resourcePool\":\"mh\"",
                                         .control_plane = true,
                                         .bootstrap = true };
        char *host, *a, *b, *addrs;
        cJSON *mm;

        (void)state;
        add_multi_homed_machines();
        host = ready_cluster("c4");
        a = ready_machine("c4", "cp-a", &cp);
        b = ready_machine("c4", "cp-b", &cp);
        mm = cl_get(&KUBE_RES_MAASMACHINES, "cp-a");
        addrs = cJSON_PrintUnformatted(json_at(mm, "status.addresses"));
        /* multi-homed indeed: both networks in status.addresses */
        assert_non_null(strstr(addrs, "\"10.20.0.20"));
        assert_non_null(strstr(addrs, "\"10.30.0.20"));
        free(addrs);
        cJSON_Delete(mm);
        wait_record(host, "10.20.0.201 10.20.0.202");

        cl_patch(&KUBE_RES_MAASCLUSTERS, "c4", NULL,
                 "{\"spec\":{\"dnsRecordAddresses\":{\"cidr\":\"10.30.0.0/24\"}}}");
        wait_record(host, "10.30.0.201 10.30.0.202");

        cl_patch(&KUBE_RES_MAASCLUSTERS, "c4", NULL,
                 "{\"spec\":{\"dnsRecordAddresses\":{\"cidr\":\"10.20.0.0/24\","
                 "\"interface\":\"eth0\"}}}");
        wait_record(host, "10.20.0.201 10.20.0.202");
        assert_true(maas_count_requests("/interfaces/") >= 2);

        cl_patch(&KUBE_RES_MAASCLUSTERS, "c4", NULL,
                 "{\"spec\":{\"dnsRecordAddresses\":{\"cidr\":\"10.30.0.0/24\","
                 "\"interface\":\"eth1\"}}}");
        wait_record(host, "10.30.0.201 10.30.0.202");
        mm = cl_get(&KUBE_RES_MAASMACHINES, "cp-a");
        assert_true(cJSON_IsTrue(json_at(mm, "status.dnsAttached")));
        cJSON_Delete(mm);
        free(a);
        free(b);
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
                cmocka_unit_test_setup_teardown(test_cluster__record_holds_the_chosen_network_only,
                                                rf_setup, rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
