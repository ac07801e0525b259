/*
 * MaasCluster spec.endpoint admission (webhooks/validate_endpoint.c, docs/endpoints.md): the
 * value rules, the type immutable once the cluster has an endpoint, and each VIP check against
 * a MAAS inventory snapshot built by hand, every denial naming the field.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "../../../webhooks/field_errors.h"
#include "../../../webhooks/validate.h"
#include "../../../webhooks/webhook_kinds.h"
#include "admission.h"
#include "json.h"
#include "maas_inventory.h"
#include "testutil.h"
#include "xalloc.h"

#define MC_DOC                                                                                  \
        "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"MaasCluster\"," \
        "\"metadata\":{\"name\":\"x\",\"namespace\":\"ns1\"},\"spec\":{\"dnsDomain\":\"maas\"%s}}"

/* A review of a MaasCluster with these spec members (old NULL: CREATE); want NULL = allowed,
 * else a text the denial holds. */
static void expect(const char *old_extra, const char *extra, const char *want)
{
        char *cur = xasprintf(MC_DOC, extra);
        char *old = old_extra ? xasprintf(MC_DOC, old_extra) : NULL;
        struct admission_request req = { .op = old ? ADMISSION_OP_UPDATE : ADMISSION_OP_CREATE,
                                         .object = cJSON_Parse(cur),
                                         .old_object = old ? cJSON_Parse(old) : NULL };
        struct admission_response resp = { 0 };

        assert_non_null(req.object);
        webhook_validate("MaasCluster", &req, &resp);
        if (!want && !resp.allowed)
                fail_msg("%s denied: %s", extra, resp.message);
        if (want && resp.allowed)
                fail_msg("%s allowed, want %s", extra, want);
        if (want && !strstr(resp.message, want))
                fail_msg("%s: \"%s\" does not hold \"%s\"", extra, resp.message, want);
        admission_response_release(&resp);
        cJSON_Delete(req.object);
        cJSON_Delete(req.old_object);
        free(cur);
        free(old);
}

static void test_endpoint__value_rules_name_the_field(void **state)
{
        static const char *const rows[][2] = {
                { "", NULL },
                { ",\"endpoint\":{\"type\":\"DNS\"}", NULL },
                { ",\"endpoint\":{\"type\":\"External\"}", NULL },
                { ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.50\"}", NULL },
                { ",\"endpoint\":{\"type\":\"VIP\",\"subnet\":\"10.20.0.0/24\",\"dnsRecord\":true}",
                  NULL },
                { ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"fd00:20::50\"}", NULL },
                { ",\"endpoint\":{\"type\":\"LoadBalancer\"}",
                  "spec.endpoint.type: Unsupported value: \"LoadBalancer\": supported values: "
                  "\"DNS\", \"VIP\", \"External\"" },
                { ",\"endpoint\":{\"type\":\"VIP\"}",
                  "spec.endpoint.address: Required value: a VIP needs an address, or a subnet "
                  "MAAS picks one from" },
                { ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0\"}",
                  "spec.endpoint.address: Invalid value: \"10.20.0\": must be an IPv4 or IPv6 "
                  "address" },
                { ",\"endpoint\":{\"type\":\"VIP\",\"subnet\":\"10.20.0.1/24\"}",
                  "spec.endpoint.subnet: Invalid value: \"10.20.0.1/24\": must be the CIDR of a "
                  "MAAS subnet" },
                { ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.30.0.5\",\"subnet\":"
                  "\"10.20.0.0/24\"}",
                  "spec.endpoint.address: Invalid value: \"10.30.0.5\": is not inside "
                  "spec.endpoint.subnet 10.20.0.0/24" },
                { ",\"endpoint\":{\"type\":\"External\",\"address\":\"10.20.0.5\"}",
                  "spec.endpoint.address: Forbidden: only with type VIP" },
                { ",\"endpoint\":{\"subnet\":\"10.20.0.0/24\"}",
                  "spec.endpoint.subnet: Forbidden: only with type VIP" },
                { ",\"endpoint\":{\"type\":\"DNS\",\"dnsRecord\":true}",
                  "spec.endpoint.dnsRecord: Forbidden: only with type VIP" },
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                expect(NULL, rows[i][0], rows[i][1]);
}

#define HAS_ENDPOINT ",\"controlPlaneEndpoint\":{\"host\":\"10.20.0.50\",\"port\":6443}"
#define VIP_50       ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.50\"}"

/* The type is chosen once: before the cluster has an endpoint it may change, after it is
 * denied naming the field (a VIP's address too); the endpoint the controller writes into an
 * unchanged type is allowed. */
static void test_endpoint__type_immutable_once_there_is_an_endpoint(void **state)
{
        (void)state;
        expect("", ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.50\"}", NULL);
        expect(VIP_50, VIP_50 HAS_ENDPOINT, NULL);
        expect(HAS_ENDPOINT,
               ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.50\"}" HAS_ENDPOINT,
               "spec.endpoint.type: Invalid value: \"VIP\": field is immutable once the cluster "
               "has an endpoint (spec.controlPlaneEndpoint.host is set)");
        expect(VIP_50 HAS_ENDPOINT, ",\"endpoint\":{\"type\":\"External\"}" HAS_ENDPOINT,
               "spec.endpoint.type: Invalid value: \"External\": field is immutable");
        expect(VIP_50 HAS_ENDPOINT, HAS_ENDPOINT,
               "spec.endpoint.type: Invalid value: \"DNS\": field is immutable");
        expect(VIP_50 HAS_ENDPOINT,
               ",\"endpoint\":{\"type\":\"VIP\",\"address\":\"10.20.0.51\"}" HAS_ENDPOINT,
               "spec.endpoint.address: Invalid value: \"10.20.0.51\": field is immutable");
}

/* The inventory: subnets 10.20.0.0/24 (gateway .1, dynamic .230-.239) and 10.30.0.0/24;
 * machine abc123 holds 10.20.0.9; user alice reserved 10.20.0.40, capmaas's user .41. */
struct inv {
        struct maas_subnet subnets[2];
        char *ips[1];
        struct maas_node node;
        struct maas_ip_address mine[1], all[2];
        struct maas_ip_range ranges[1];
        struct maas_inventory_lists l;
};

static struct maas_inventory_snapshot *build(struct inv *v)
{
        *v = (struct inv){
                .subnets = { { .id = 1,
                               .name = (char[]){ "prov" },
                               .cidr = (char[]){ "10.20.0.0/24" },
                               .gateway_ip = (char[]){ "10.20.0.1" },
                               .vid = -1 },
                             { .id = 2,
                               .name = (char[]){ "pub" },
                               .cidr = (char[]){ "10.30.0.0/24" },
                               .vid = -1 } },
                .ips = { (char[]){ "10.20.0.9" } },
                .mine = { { .ip = (char[]){ "10.20.0.41" },
                            .alloc_type = 4,
                            .owner = (char[]){ "capmaas" } } },
                .all = { { .ip = (char[]){ "10.20.0.40" },
                           .alloc_type = 4,
                           .owner = (char[]){ "alice" } },
                         { .ip = (char[]){ "10.20.0.41" },
                           .alloc_type = 4,
                           .owner = (char[]){ "capmaas" } } },
                .ranges = { { .type = (char[]){ "dynamic" },
                              .start_ip = (char[]){ "10.20.0.230" },
                              .end_ip = (char[]){ "10.20.0.239" } } },
        };
        v->node = (struct maas_node){ .system_id = (char[]){ "abc123" },
                                      .ip_addresses = { .v = v->ips, .n = 1 } };
        v->l = (struct maas_inventory_lists){ .subnets = { v->subnets, 2 },
                                              .machines = { &v->node, 1 },
                                              .reserved_mine = { v->mine, 1 },
                                              .reserved_all = { v->all, 2 },
                                              .ranges = { v->ranges, 1 } };
        return maas_inventory_snapshot_build(&v->l, 0);
}

#define S(x) ((char[]){ x })

/* maas_check_cluster_spec of a VIP spec: the only error's text (NULL = none) and the
 * warnings' count. */
static void check(const struct maas_inventory_snapshot *s,
                  char *address,
                  char *subnet,
                  const char *want,
                  size_t warnings)
{
        struct schema_endpoint e = { .type = (char[]){ "VIP" },
                                     .address = address,
                                     .subnet = subnet };
        struct maas_cluster_spec sp = { .endpoint = &e };
        struct admission_response warn = { 0 };
        struct field_errors fe;
        struct maas_check c = { .path = "spec", .s = s, .fe = &fe, .warn = &warn };
        char *t;

        field_errors_init(&fe);
        maas_check_cluster_spec(&sp, &c);
        if (!want && fe.n)
                fail_msg("%s: %zu errors", address ? address : subnet, fe.n);
        if (want) {
                assert_int_equal(fe.n, 1);
                t = field_error_text(&fe.items[0]);
                if (strcmp(t, want) != 0)
                        fail_msg("got \"%s\", want \"%s\"", t, want);
                free(t);
        }
        assert_int_equal(warn.n_warnings, warnings);
        admission_response_release(&warn);
        field_errors_release(&fe);
}

static void test_endpoint__vip_checked_against_maas(void **state)
{
        struct inv v;
        struct maas_inventory_snapshot *s = build(&v);

        (void)state;
        check(s, S("10.20.0.50"), NULL, NULL, 0);
        check(s, S("10.99.0.5"), NULL,
              "spec.endpoint.address: Invalid value: \"10.99.0.5\": is not inside any MAAS "
              "subnet (its subnets: 10.20.0.0/24, 10.30.0.0/24)",
              0);
        check(s, S("10.20.0.0"), NULL,
              "spec.endpoint.address: Invalid value: \"10.20.0.0\": is the network address of "
              "MAAS subnet 10.20.0.0/24",
              0);
        check(s, S("10.30.0.255"), NULL,
              "spec.endpoint.address: Invalid value: \"10.30.0.255\": is the broadcast address "
              "of MAAS subnet 10.30.0.0/24",
              0);
        check(s, S("10.20.0.1"), NULL,
              "spec.endpoint.address: Invalid value: \"10.20.0.1\": is the gateway of MAAS "
              "subnet 10.20.0.0/24",
              0);
        check(s, S("10.20.0.235"), NULL,
              "spec.endpoint.address: Invalid value: \"10.20.0.235\": is inside the dynamic "
              "(DHCP) range 10.20.0.230-10.20.0.239 of MAAS subnet 10.20.0.0/24: MAAS leases it "
              "to any host",
              0);
        check(s, S("10.20.0.9"), NULL,
              "spec.endpoint.address: Invalid value: \"10.20.0.9\": is in use by MAAS machine "
              "abc123",
              0);
        check(s, S("10.20.0.40"), NULL,
              "spec.endpoint.address: Invalid value: \"10.20.0.40\": is already reserved in "
              "MAAS by user alice",
              0);
        /* capmaas's own reservation (this cluster's before a move): a warning */
        check(s, S("10.20.0.41"), NULL, NULL, 1);
        check(s, NULL, S("10.30.0.0/24"), NULL, 0);
        check(s, NULL, S("10.40.0.0/24"),
              "spec.endpoint.subnet: Invalid value: \"10.40.0.0/24\": no such subnet in MAAS "
              "(its subnets: 10.20.0.0/24, 10.30.0.0/24)",
              0);
        maas_inventory_snapshot_release(s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_endpoint__value_rules_name_the_field),
                cmocka_unit_test(test_endpoint__type_immutable_once_there_is_an_endpoint),
                cmocka_unit_test(test_endpoint__vip_checked_against_maas),
        };

        xalloc_install_cjson_hooks();
        return cmocka_run_group_tests_name("validate_endpoint", tests, NULL, NULL);
}
