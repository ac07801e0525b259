/*
 * Unit tests for maascluster_addresses: which addresses of a control plane the endpoint
 * record may hold, from its status.addresses (by CIDR, or the first ExternalIP by default)
 * and from MAAS's interface links (by interface name and CIDR), on a multi-homed machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../reconcile/maascluster_addresses.h"
#include "json.h"
#include "testutil.h"
#include "xalloc.h"

/* A machine on two networks: eth0 10.20.0.5 (provisioning), eth1 10.30.0.5 and fd00:30::5,
 * as the MaasMachine reconciler reports them (each as ExternalIP and InternalIP). */
static cJSON *multi_homed(void)
{
        return test_json("{\"status\":{\"addresses\":["
                         "{\"type\":\"Hostname\",\"address\":\"m1\"},"
                         "{\"type\":\"ExternalIP\",\"address\":\"10.20.0.5\"},"
                         "{\"type\":\"InternalIP\",\"address\":\"10.20.0.5\"},"
                         "{\"type\":\"ExternalIP\",\"address\":\"10.30.0.5\"},"
                         "{\"type\":\"InternalIP\",\"address\":\"10.30.0.5\"},"
                         "{\"type\":\"InternalIP\",\"address\":\"10.30.0.6\"},"
                         "{\"type\":\"ExternalIP\",\"address\":\"fd00:30::5\"}]}}");
}

static struct cidr net(const char *s)
{
        struct cidr c;

        assert_int_equal(cidr_parse(s, &c), 0);
        return c;
}

static void test_endpoint__default_is_the_first_external_ip(void **state)
{
        cJSON *mm = multi_homed();
        const char *out[8];

        (void)state;
        assert_int_equal(endpoint_addresses_from_status(mm, NULL, out, 8), 1);
        assert_string_equal(out[0], "10.20.0.5");
        cJSON_Delete(mm);
        mm = test_json("{\"status\":{}}");
        assert_int_equal(endpoint_addresses_from_status(mm, NULL, out, 8), 0);
        cJSON_Delete(mm);
}

static void test_endpoint__by_cidr_only_that_network(void **state)
{
        cJSON *mm = multi_homed();
        struct cidr c30 = net("10.30.0.0/24"), c6 = net("fd00:30::/64"), c99 = net("10.99.0.0/16");
        const char *out[8];

        (void)state;
        /* an InternalIP only (10.30.0.6) is not an address the record takes */
        assert_int_equal(endpoint_addresses_from_status(mm, &c30, out, 8), 1);
        assert_string_equal(out[0], "10.30.0.5");
        assert_int_equal(endpoint_addresses_from_status(mm, &c6, out, 8), 1);
        assert_string_equal(out[0], "fd00:30::5");
        assert_int_equal(endpoint_addresses_from_status(mm, &c99, out, 8), 0);
        cJSON_Delete(mm);
}

static void link(struct maas_interface *f, size_t i, const char *ip, const char *cidr)
{
        f->links[i] = (struct maas_link){ .id = (int)i + 1,
                                          .mode = MAAS_LINK_AUTO,
                                          .ip = ip ? xstrdup(ip) : NULL,
                                          .subnet_id = 1,
                                          .subnet_cidr = xstrdup(cidr) };
}

static void test_endpoint__by_interface_and_cidr_from_links(void **state)
{
        struct maas_interface_list l = { .items = xcalloc(2, sizeof(struct maas_interface)),
                                         .n = 2 };
        struct cidr c20 = net("10.20.0.0/24"), c30 = net("10.30.0.0/24");
        const char *out[8];

        (void)state;
        l.items[0] = (struct maas_interface){ .id = 1,
                                              .name = xstrdup("eth0"),
                                              .mac_address = xstrdup(""),
                                              .links = xcalloc(1, sizeof(struct maas_link)),
                                              .n_links = 1 };
        link(&l.items[0], 0, "10.20.0.5", "10.20.0.0/24");
        l.items[1] = (struct maas_interface){ .id = 2,
                                              .name = xstrdup("eth1"),
                                              .mac_address = xstrdup(""),
                                              .links = xcalloc(3, sizeof(struct maas_link)),
                                              .n_links = 3 };
        link(&l.items[1], 0, "10.30.0.5", "10.30.0.0/24");
        link(&l.items[1], 1, NULL, "10.30.0.0/24"); /* an AUTO link before deploy */
        link(&l.items[1], 2, "10.20.0.77", "10.20.0.0/24");
        assert_int_equal(endpoint_addresses_from_links(&l, "eth1", &c30, out, 8), 1);
        assert_string_equal(out[0], "10.30.0.5");
        /* the CIDR and the interface must both match */
        assert_int_equal(endpoint_addresses_from_links(&l, "eth1", &c20, out, 8), 1);
        assert_string_equal(out[0], "10.20.0.77");
        assert_int_equal(endpoint_addresses_from_links(&l, "eth0", &c30, out, 8), 0);
        assert_int_equal(endpoint_addresses_from_links(&l, "eth9", &c20, out, 8), 0);
        assert_int_equal(endpoint_addresses_from_links(&l, "eth1", &c20, out, 0), 0);
        maas_interface_list_release(&l);
}

static void test_endpoint__pick_falls_back_on_a_bad_cidr(void **state)
{
        char bad_cidr[] = "10.30.0.0", ok_cidr[] = "10.30.0.0/24";
        struct schema_dns_record_addresses bad = { .cidr = bad_cidr };
        struct schema_dns_record_addresses ok = { .cidr = ok_cidr };
        struct endpoint_pick p;
        cJSON *mm = multi_homed();
        const char *out[8];
        size_t n = 0;

        (void)state;
        assert_false(endpoint_pick_init(&p, &bad));
        assert_int_equal(endpoint_pick_addresses(&p, NULL, NULL, mm, out, 8, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(out[0], "10.20.0.5");
        endpoint_pick_release(&p);
        assert_true(endpoint_pick_init(&p, &ok));
        assert_int_equal(endpoint_pick_addresses(&p, NULL, NULL, mm, out, 8, &n), 0);
        assert_int_equal(n, 1);
        assert_string_equal(out[0], "10.30.0.5");
        endpoint_pick_release(&p);
        assert_true(endpoint_pick_init(&p, NULL));
        endpoint_pick_release(&p);
        cJSON_Delete(mm);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_endpoint__default_is_the_first_external_ip),
                cmocka_unit_test(test_endpoint__by_cidr_only_that_network),
                cmocka_unit_test(test_endpoint__by_interface_and_cidr_from_links),
                cmocka_unit_test(test_endpoint__pick_falls_back_on_a_bad_cidr),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
