/*
 * The MaasCluster reconciler's VIP and External endpoints (docs/endpoints.md): the VIP
 * reserved in MAAS for capmaas's user and set as the endpoint, handed to no machine,
 * released at delete after the machines, kept for a move and found again by address (no
 * second reservation); a MAAS refusal as a condition and an event; an External endpoint
 * with no MAAS call at all. (reconcile_fixture.h: kube-sims, maas-sim and the provider over
 * real loopback; the test plays the CAPI core controllers.)
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

#define ANN_VIP "maas.infrastructure.cluster.x-k8s.io/vip"

/* A Cluster and its MaasCluster with these spec members (after dnsDomain) and annotations
 * (a JSON object's members, or ""). */
static void make_endpoint_cluster(const char *name, const char *spec, const char *annotations)
{
        char uid[64];

        cl_create(&KUBE_RES_CLUSTERS,
                  test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\","
                            "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"clusterNetwork\":"
                            "{\"apiServerPort\":6443},\"infrastructureRef\":{\"apiVersion\":"
                            "\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"MaasCluster\","
                            "\"name\":\"%s\"}}}",
                            name, name));
        cl_patch(&KUBE_RES_CLUSTERS, name, "status",
                 "{\"status\":{\"infrastructureReady\":true,\"initialization\":"
                 "{\"infrastructureProvisioned\":true}}}");
        cl_create(&KUBE_RES_MAASCLUSTERS,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                            "\"MaasCluster\",\"metadata\":{\"name\":\"%s\",\"annotations\":{%s},"
                            "\"labels\":{\"cluster.x-k8s.io/cluster-name\":\"%s\"},"
                            "\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"Cluster\",\"name\":\"%s\",\"uid\":\"%s\"}]},"
                            "\"spec\":{\"dnsDomain\":\"maas\"%s}}",
                            name, annotations, name, name, UID_OF(&KUBE_RES_CLUSTERS, name, uid),
                            spec));
}

/* maas-sim's reservations: how many, and the owner of ip ("" when it is not reserved). */
static int reservations(const char *ip, char owner[32])
{
        cJSON *st = maassim_call(&RF.sim, "GET", "state", NULL);
        const cJSON *r;
        int n = cJSON_GetArraySize(json_at(st, "reservations"));

        if (owner)
                owner[0] = '\0';
        cJSON_ArrayForEach (r, json_at(st, "reservations"))
                if (owner && ip && strcmp(OR(json_at_str(r, "ip"), ""), ip) == 0)
                        (void)snprintf(owner, 32, "%s", OR(json_at_str(r, "owner"), ""));
        cJSON_Delete(st);
        return n;
}

static bool one_reservation(const void *arg)
{
        (void)arg;
        return reservations(NULL, NULL) == 1;
}

static const char *LB_TRUE[] = { "LoadBalancerReady", "True", "LoadBalancerReady" };

/* The address of the machine MAAS deploys first (hkd3ps, 10.20.0.10 in the inventory) as
 * the VIP: reserved for capmaas's user, the endpoint, no DNS record; released behind
 * capmaas's back, reserved again by the next pass; the control plane
 * deployed next gets another address and no DNSAttached wait; deleting the cluster waits
 * for the machine, then releases the reservation. */
static void test_vip__reserved_given_to_no_machine_released_on_delete(void **state)
{
        const char *api_up[] = { "APIServerAvailable", "True", "APIServerAvailable" };
        char owner[32], uid[64];
        char *sid, *proof;
        cJSON *mc, *mm;

        (void)state;
        make_endpoint_cluster("v1", ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.10\"}",
                              "");
        make_kubeconfig_secret("v1");
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "v1", pred_cond_reason, api_up);
        assert_string_equal(json_at_str(mc, "spec.controlPlaneEndpoint.host"), "10.20.0.10");
        assert_int_equal((int)json_at(mc, "spec.controlPlaneEndpoint.port")->valuedouble, 6443);
        assert_true(cl_cond_is(mc, "LoadBalancerReady", "True", "LoadBalancerReady"));
        assert_true(cl_cond_is(mc, "Ready", "True", NULL));
        assert_true(cJSON_IsTrue(json_at(mc, "status.ready")));
        cJSON_Delete(mc);
        assert_int_equal(reservations("10.20.0.10", owner), 1);
        assert_string_equal(owner, "admin"); /* the user of capmaas's key */
        assert_int_equal(n_records(), 0);
        proof = xasprintf("capmaas-vip-%s.maas", UID_OF(&KUBE_RES_MAASCLUSTERS, "v1", uid));
        assert_true(record_has(proof, "10.20.0.10")); /* the reserve's hostname: this cluster's */
        wait_event("VIPReserved");

        /* released behind capmaas's back: the next pass reserves it again */
        assert_int_equal(maas_release_ip(RF.maas, "10.20.0.10", NULL), 0);
        assert_int_equal(reservations(NULL, NULL), 0);
        cl_patch(&KUBE_RES_MAASCLUSTERS, "v1", NULL,
                 "{\"metadata\":{\"annotations\":{\"test/nudge\":\"1\"}}}");
        assert_true(cl_eventually(one_reservation, NULL));
        assert_int_equal(maas_count_requests("reserve"), 2);

        sid = ready_machine("v1", "v1-cp0",
                            &(struct machine_spec){ .control_plane = true, .bootstrap = true });
        mm = cl_get(&KUBE_RES_MAASMACHINES, "v1-cp0");
        assert_string_equal(sid, "hkd3ps");
        assert_non_null(mm_external_ip(mm));
        assert_string_not_equal(mm_external_ip(mm), "10.20.0.10");
        assert_null(cl_condition(mm, "DNSAttached"));
        cJSON_Delete(mm);

        cl_delete(&KUBE_RES_MAASCLUSTERS, "v1");
        cl_sleep_ms(300);
        assert_int_equal(reservations(NULL, NULL), 1); /* the machine still exists */
        cl_delete(&KUBE_RES_MAASMACHINES, "v1-cp0");
        cl_wait(&KUBE_RES_MAASMACHINES, "v1-cp0", NULL, NULL);
        cl_wait(&KUBE_RES_MAASCLUSTERS, "v1", NULL, NULL);
        assert_int_equal(reservations(NULL, NULL), 0);
        assert_int_equal(n_records(), 0);
        assert_false(record_has(proof, NULL)); /* MAAS deletes it with the reservation */
        wait_event("VIPReleased");
        free(proof);
        free(sid);
}

/* A VIP MAAS picks from a subnet: persisted in the vip annotation; a delete for move keeps
 * it; the copy clusterctl move creates (metadata and spec, no status) finds it by address
 * and reserves nothing more; the final delete releases it. With dnsRecord a MAAS record
 * names it, and goes with it. */
static void test_vip__subnet_pick_survives_a_move(void **state)
{
        char spec[256], ann[128];
        const char *host;
        char *vip, *fqdn;
        int reads;
        cJSON *mc;

        (void)state;
        make_endpoint_cluster("v2",
                              ",\"endpoint\":{\"type\":\"VIP\",\"subnet\":\"10.30.0.0/24\","
                              "\"dnsRecord\":true}",
                              "");
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "v2", pred_cond_reason, LB_TRUE);
        host = json_at_str(mc, "spec.controlPlaneEndpoint.host");
        assert_string_equal(host, "10.30.0.2");
        assert_string_equal(OR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                       json_at(mc, "metadata.annotations"), ANN_VIP)),
                               ""),
                            host);
        vip = xstrdup(host);
        fqdn = xstrdup(OR(json_at_str(mc, "status.network.dnsName"), ""));
        assert_true(record_has(fqdn, vip));
        cJSON_Delete(mc);
        assert_int_equal(reservations(vip, NULL), 1);
        assert_int_equal(maas_count_requests("reserve"), 1);

        /* clusterctl move: the source deletes for move, the target gets metadata and spec */
        cl_patch(&KUBE_RES_MAASCLUSTERS, "v2", NULL,
                 "{\"metadata\":{\"annotations\":{\"clusterctl.cluster.x-k8s.io/"
                 "delete-for-move\":\"\"}}}");
        cl_delete(&KUBE_RES_MAASCLUSTERS, "v2");
        cl_wait(&KUBE_RES_MAASCLUSTERS, "v2", NULL, NULL);
        cl_delete(&KUBE_RES_CLUSTERS, "v2");
        cl_wait(&KUBE_RES_CLUSTERS, "v2", NULL, NULL);
        assert_int_equal(reservations(vip, NULL), 1);
        assert_true(record_has(fqdn, vip));
        (void)snprintf(spec, sizeof(spec),
                       ",\"endpoint\":{\"type\":\"VIP\",\"subnet\":\"10.30.0.0/24\",\"dnsRecord\":"
                       "true},\"controlPlaneEndpoint\":{\"host\":\"%s\",\"port\":6443}",
                       vip);
        (void)snprintf(ann, sizeof(ann),
                       "\"" ANN_VIP "\":\"%s\",\"maas.infrastructure.cluster.x-k8s.io/"
                       "dns-record\":\"%s\"",
                       vip, fqdn);
        reads = maas_count_requests("ipaddresses");
        make_endpoint_cluster("v2", spec, ann);
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "v2", pred_cond_reason, LB_TRUE);
        assert_string_equal(json_at_str(mc, "spec.controlPlaneEndpoint.host"), vip);
        cJSON_Delete(mc);
        assert_int_equal(maas_count_requests("reserve"), 1);
        assert_int_equal(reservations(NULL, NULL), 1);
        assert_int_equal(n_records(), 1);
        assert_true(maas_count_requests("ipaddresses") > reads); /* found by address */

        cl_delete(&KUBE_RES_MAASCLUSTERS, "v2");
        cl_wait(&KUBE_RES_MAASCLUSTERS, "v2", NULL, NULL);
        assert_int_equal(reservations(NULL, NULL), 0);
        assert_int_equal(n_records(), 0);
        free(vip);
        free(fqdn);
}

static bool pred_lb_refused(const cJSON *o, const void *arg)
{
        (void)arg;
        return cl_cond_is(o, "LoadBalancerReady", "False", "VIPReservationFailed");
}

/* Another cluster's address (capmaas's user holds it for that one): refused before MAAS is
 * asked; an address MAAS refuses (inside a dynamic range): MAAS's message. Both are the
 * condition and a Warning event; the cluster is not ready, and retries back off. */
static void test_vip__conflict_is_a_condition_and_an_event(void **state)
{
        const cJSON *k;
        cJSON *mc;
        int reserves;

        (void)state;
        make_endpoint_cluster("v3", ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.100\"}",
                              "");
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "v3", pred_cond_reason, LB_TRUE));
        make_endpoint_cluster("v4", ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.100\"}",
                              "");
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "v4", pred_lb_refused, NULL);
        k = cl_condition(mc, "LoadBalancerReady");
        assert_non_null(strstr(json_at_str(k, "message"),
                               "10.20.0.100 is already reserved for MaasCluster "));
        assert_false(cJSON_IsTrue(json_at(mc, "status.ready")));
        assert_null(json_at(mc, "spec.controlPlaneEndpoint.host"));
        cJSON_Delete(mc);
        wait_event("VIPReservationFailed");
        assert_int_equal(reservations(NULL, NULL), 1);

        make_endpoint_cluster("v5", ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.233\"}",
                              "");
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "v5", pred_lb_refused, NULL);
        k = cl_condition(mc, "LoadBalancerReady");
        assert_non_null(strstr(json_at_str(k, "message"),
                               "MAAS refused to reserve 10.20.0.233: IP address 10.20.0.233 "
                               "belongs to an existing dynamic range."));
        cJSON_Delete(mc);
        reserves = maas_count_requests("reserve");
        cl_sleep_ms(1000);
        /* the controller's exponential backoff: a few retries in a second, not a busy loop */
        assert_true(maas_count_requests("reserve") - reserves <= 12);
        assert_int_equal(reservations(NULL, NULL), 1);
}

static bool pred_no_vip(const cJSON *o, const void *arg)
{
        (void)arg;
        return pred_lb_refused(o, NULL) &&
               !cJSON_GetObjectItemCaseSensitive(json_at(o, "metadata.annotations"), ANN_VIP);
}

/* Two clusters of one MAAS user, one address: the first has reserved it (with its own
 * ownership record, capmaas-vip-<its UID>) and not yet written its vip annotation. The
 * second finds the reservation by address but no proof it is its own: refused (the
 * condition, no annotation, no endpoint), and its delete leaves the reservation alone. A
 * cluster whose own record holds the address (a crash between the reserve and the
 * annotation) adopts it without a second reserve. */
static void test_vip__another_clusters_reservation_is_not_adopted(void **state)
{
        const char *paused = "\"cluster.x-k8s.io/paused\":\"\"";
        struct maas_ip_address a = { 0 };
        const cJSON *k;
        char uid[64], *label;
        cJSON *mc;
        int reserves;

        (void)state;
        assert_int_equal(
                maas_reserve_ip(
                        RF.maas,
                        &(struct maas_reserve_ip){
                                .ip = "10.20.0.100",
                                .hostname = "capmaas-vip-0b0b0b0b-0000-4000-8000-00000000000a" },
                        &a, NULL),
                0);
        maas_ip_address_release(&a);
        make_endpoint_cluster("v6", ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.100\"}",
                              "");
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "v6", pred_no_vip, NULL);
        k = cl_condition(mc, "LoadBalancerReady");
        assert_non_null(strstr(json_at_str(k, "message"),
                               "10.20.0.100 is reserved by capmaas's MAAS user, but not for this "
                               "MaasCluster"));
        assert_null(json_at(mc, "spec.controlPlaneEndpoint.host"));
        cJSON_Delete(mc);
        wait_event("VIPReservationFailed");
        cl_delete(&KUBE_RES_MAASCLUSTERS, "v6");
        cl_wait(&KUBE_RES_MAASCLUSTERS, "v6", NULL, NULL);
        assert_int_equal(reservations("10.20.0.100", NULL), 1);
        assert_true(
                record_has("capmaas-vip-0b0b0b0b-0000-4000-8000-00000000000a.maas", "10.20.0.100"));

        /* its own record: adopted (paused until the test has reserved as capmaas would) */
        make_endpoint_cluster("v7", ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.101\"}",
                              paused);
        label = xasprintf("capmaas-vip-%s", UID_OF(&KUBE_RES_MAASCLUSTERS, "v7", uid));
        assert_int_equal(
                maas_reserve_ip(RF.maas,
                                &(struct maas_reserve_ip){ .ip = "10.20.0.101", .hostname = label },
                                &a, NULL),
                0);
        maas_ip_address_release(&a);
        reserves = maas_count_requests("reserve");
        cl_patch(&KUBE_RES_MAASCLUSTERS, "v7", NULL,
                 "{\"metadata\":{\"annotations\":{\"cluster.x-k8s.io/paused\":null}}}");
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "v7", pred_cond_reason, LB_TRUE);
        assert_string_equal(json_at_str(mc, "spec.controlPlaneEndpoint.host"), "10.20.0.101");
        assert_string_equal(OR(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                                       json_at(mc, "metadata.annotations"), ANN_VIP)),
                               ""),
                            "10.20.0.101");
        cJSON_Delete(mc);
        assert_int_equal(maas_count_requests("reserve"), reserves);
        assert_int_equal(reservations(NULL, NULL), 2);
        free(label);
}

/* External: the endpoint the user set, Ready when its API server answers, and not one MAAS
 * call about the endpoint. */
static void test_external__no_maas_call_ready_when_it_answers(void **state)
{
        const char *api_up[] = { "APIServerAvailable", "True", "APIServerAvailable" };
        const char *waiting[] = { "LoadBalancerReady", "False", "WaitingForEndpoint" };
        cJSON *mc;

        (void)state;
        make_endpoint_cluster("x1", ",\"endpoint\":{\"type\":\"External\"}", "");
        cJSON_Delete(cl_wait(&KUBE_RES_MAASCLUSTERS, "x1", pred_cond_reason, waiting));
        cl_patch(&KUBE_RES_MAASCLUSTERS, "x1", NULL,
                 "{\"spec\":{\"controlPlaneEndpoint\":{\"host\":\"api.example.test\","
                 "\"port\":7443}}}");
        make_kubeconfig_secret("x1");
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "x1", pred_cond_reason, api_up);
        assert_string_equal(json_at_str(mc, "spec.controlPlaneEndpoint.host"), "api.example.test");
        assert_int_equal((int)json_at(mc, "spec.controlPlaneEndpoint.port")->valuedouble, 7443);
        assert_true(cl_cond_is(mc, "LoadBalancerReady", "True", "LoadBalancerReady"));
        assert_true(cl_cond_is(mc, "Ready", "True", NULL));
        cJSON_Delete(mc);
        cl_delete(&KUBE_RES_MAASCLUSTERS, "x1");
        cl_wait(&KUBE_RES_MAASCLUSTERS, "x1", NULL, NULL);
        assert_int_equal(maas_count_requests("ipaddresses"), 0);
        assert_int_equal(maas_count_requests("dnsresources"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_vip__reserved_given_to_no_machine_released_on_delete, rf_setup,
                        rf_teardown),
                cmocka_unit_test_setup_teardown(test_vip__subnet_pick_survives_a_move, rf_setup,
                                                rf_teardown),
                cmocka_unit_test_setup_teardown(test_vip__conflict_is_a_condition_and_an_event,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(
                        test_vip__another_clusters_reservation_is_not_adopted, rf_setup,
                        rf_teardown),
                cmocka_unit_test_setup_teardown(test_external__no_maas_call_ready_when_it_answers,
                                                rf_setup, rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
