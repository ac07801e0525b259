/*
 * Integration: the MAAS client's network calls (subnets, interfaces, a static address linked
 * and undone) against a real maas-sim process on 127.0.0.1, whose links follow MAAS's rules
 * (tests/sim/maas/network.c). Each test starts its own maas-sim.
 *
 * Needs $CAPMAAS_BUILD_DIR/maas-sim (build the maas-sim target) and $CAPMAAS_SOURCE_DIR.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "err.h"
#include "json.h"
#include "maas_client.h"
#include "maassim.h"
#include "testutil.h"
#include "xalloc.h"

#define ADMIN_KEY "ck:tk:secret1"
#define USER2_KEY "ck2:tk2:secret2"
#define SIM_ARGS                                                                               \
        (const char *const[])                                                                  \
        {                                                                                      \
                "--api-key", USER2_KEY, "--deploy-seconds", "0.2", "--release-seconds", "0.1", \
                        NULL                                                                   \
        }

/* The sample inventory's first two machines, on 10.20.0.0/24 (gateway 10.20.0.1). */
#define SID_A "hkd3ps"
#define SID_B "eccapw"

struct fx {
        struct maassim sim;
        struct maas_config cfg, cfg2;
        struct http_transport *t, *t2;
        struct maas_client *mc, *user2;
};

static struct maas_client *client_for(const char *url,
                                      const char *key,
                                      struct http_transport **ret_t,
                                      struct maas_config *cfg)
{
        struct maas_client *mc = NULL;
        char *err = NULL;

        assert_int_equal(maas_config_parse(url, key, cfg, &err), 0);
        assert_int_equal(
                http_transport_curl_new(&(struct http_transport_opts){ .timeout_ms = 5000 }, ret_t),
                0);
        assert_int_equal(
                maas_client_new(&(struct maas_client_opts){ .cfg = cfg, .transport = *ret_t }, &mc),
                0);
        return mc;
}

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));

        if (maassim_start(&f->sim, ADMIN_KEY, SIM_ARGS) < 0) {
                free(f);
                return -1;
        }
        f->mc = client_for(f->sim.proc.url, ADMIN_KEY, &f->t, &f->cfg);
        f->user2 = client_for(f->sim.proc.url, USER2_KEY, &f->t2, &f->cfg2);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        int st;

        maas_client_free(f->mc);
        maas_client_free(f->user2);
        http_transport_free(f->t);
        http_transport_free(f->t2);
        maas_config_release(&f->cfg);
        maas_config_release(&f->cfg2);
        st = maassim_stop(&f->sim);
        free(f);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void allocate(struct fx *f, const char *sid, struct maas_node *ret)
{
        assert_int_equal(
                maas_allocate(f->mc, &(struct maas_allocate_opts){ .system_id = sid }, ret, NULL),
                0);
}

/* Requests the sim logged with this op. */
static int count_op(struct fx *f, const char *op)
{
        cJSON *doc = maassim_call(&f->sim, "GET", "requests", NULL);
        const cJSON *e;
        int n = 0;

        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "requests")) {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "op");

                n += cJSON_IsString(o) && strcmp(o->valuestring, op) == 0;
        }
        cJSON_Delete(doc);
        return n;
}

static const struct maas_link *only_link(const struct maas_interface *f)
{
        assert_int_equal(f->n_links, 1);
        return &f->links[0];
}

static void test_maas_network__lists_subnets_with_gateway_and_dns(void **state)
{
        struct fx *f = *state;
        struct maas_subnet_list l = { 0 };
        const struct maas_subnet *prov = NULL;

        assert_int_equal(maas_list_subnets(f->mc, &l, NULL), 0);
        for (size_t i = 0; i < l.n; i++)
                if (strcmp(l.items[i].cidr, "10.20.0.0/24") == 0)
                        prov = &l.items[i];
        if (!prov) {
                fail_msg("no subnet 10.20.0.0/24 in the list");
                return;
        }
        assert_string_equal(prov->name, "provisioning");
        assert_string_equal(prov->gateway_ip, "10.20.0.1");
        assert_int_equal(prov->dns_servers.n, 1);
        assert_string_equal(prov->dns_servers.v[0], "10.20.0.2");
        assert_int_equal(prov->vid, 0);
        maas_subnet_list_release(&l);
}

static void test_maas_network__boot_interface_starts_with_an_auto_link(void **state)
{
        struct fx *f = *state;
        struct maas_node n = { 0 };
        struct maas_interface_list l = { 0 };
        const struct maas_link *k;

        assert_int_equal(maas_get_machine(f->mc, SID_A, &n, NULL), 0);
        assert_int_equal(maas_list_interfaces(f->mc, SID_A, &l, NULL), 0);
        assert_int_equal(l.n, 1);
        assert_int_equal(n.boot_interface_id, l.items[0].id);
        assert_string_equal(l.items[0].name, "eth0");
        k = only_link(&l.items[0]);
        assert_int_equal(k->mode, MAAS_LINK_AUTO);
        assert_null(k->ip); /* assigned on deploy */
        assert_string_equal(k->subnet_cidr, "10.20.0.0/24");
        maas_interface_list_release(&l);
        maas_node_release(&n);
}

static void test_maas_network__static_ip_replaces_the_auto_link_and_is_deployed(void **state)
{
        struct fx *f = *state;
        struct maas_node n = { 0 };
        struct maas_interface after = { 0 };
        struct maas_static_ip o = { .ip = "10.20.0.200", .cidr = "10.20.0.0/24" };
        cJSON *m;
        int links;

        allocate(f, SID_A, &n);
        o.boot_interface_id = n.boot_interface_id;
        maas_node_release(&n);
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, &after, NULL), 0);
        assert_int_equal(only_link(&after)->mode, MAAS_LINK_STATIC);
        assert_string_equal(only_link(&after)->ip, "10.20.0.200");
        maas_interface_release(&after);
        /* again: nothing to do, nothing written */
        links = count_op(f, "link_subnet");
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, NULL), 0);
        assert_int_equal(count_op(f, "link_subnet"), links);
        assert_int_equal(maas_deploy(f->mc, SID_A,
                                     &(struct maas_deploy_opts){ .image = "ubuntu/jammy" }, &n,
                                     NULL),
                         0);
        assert_int_equal(n.ip_addresses.n, 1);
        assert_string_equal(n.ip_addresses.v[0], "10.20.0.200");
        maas_node_release(&n);
        m = maassim_machine(&f->sim, SID_A);
        assert_string_equal(
                cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(m, "links"), 0), "mode")
                        ->valuestring,
                "static");
        cJSON_Delete(m);
}

static void test_maas_network__address_in_use_carries_maas_text_and_undo_restores_auto(void **state)
{
        struct fx *f = *state;
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        struct maas_interface after = { 0 };
        struct maas_static_ip o = { .ip = "10.20.0.200",
                                    .cidr = "10.20.0.0/24",
                                    .boot_interface_id = -1 };

        allocate(f, SID_A, &n);
        maas_node_release(&n);
        allocate(f, SID_B, &n);
        maas_node_release(&n);
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, NULL), 0);
        assert_int_equal(maas_link_static_ip(f->mc, SID_B, &o, NULL, &me), CM_ENOTFOUND);
        assert_int_equal(me.http_status, 404); /* MAAS's StaticIPAddressUnavailable */
        assert_string_equal(me.message, "IP address is already in use.");
        maas_error_release(&me);
        /* B's AUTO link went first; the undo puts it back */
        assert_int_equal(maas_unlink_static_ip(f->mc, SID_B, &o, &after, NULL), 0);
        assert_int_equal(only_link(&after)->mode, MAAS_LINK_AUTO);
        assert_string_equal(only_link(&after)->subnet_cidr, "10.20.0.0/24");
        maas_interface_release(&after);
        /* A's undo frees the address for B */
        assert_int_equal(maas_unlink_static_ip(f->mc, SID_A, &o, &after, NULL), 0);
        assert_int_equal(only_link(&after)->mode, MAAS_LINK_AUTO);
        maas_interface_release(&after);
        assert_int_equal(maas_link_static_ip(f->mc, SID_B, &o, NULL, NULL), 0);
}

static void test_maas_network__undo_with_nothing_linked_writes_nothing(void **state)
{
        struct fx *f = *state;
        struct maas_static_ip o = { .ip = "10.20.0.200",
                                    .cidr = "10.20.0.0/24",
                                    .boot_interface_id = -1 };

        assert_int_equal(maas_unlink_static_ip(f->mc, SID_A, &o, NULL, NULL), 0);
        assert_int_equal(count_op(f, "unlink_subnet") + count_op(f, "link_subnet"), 0);
}

static void test_maas_network__address_outside_the_subnet_is_refused_by_field(void **state)
{
        struct fx *f = *state;
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        struct maas_static_ip o = { .ip = "10.21.0.5",
                                    .cidr = "10.20.0.0/24",
                                    .boot_interface_id = -1 };

        allocate(f, SID_A, &n);
        maas_node_release(&n);
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, &me), CM_EINVAL);
        assert_string_equal(me.message, "ip_address: IP address is not in the given subnet "
                                        "'provisioning:10.20.0.0/24(vid=0)'.");
        maas_error_release(&me);
}

static void test_maas_network__unknown_subnet_and_interface_name_what_exists(void **state)
{
        struct fx *f = *state;
        struct maas_error me = { 0 };
        struct maas_static_ip o = { .ip = "10.99.0.5",
                                    .cidr = "10.99.0.0/24",
                                    .boot_interface_id = -1 };

        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, &me), CM_ENOTFOUND);
        assert_int_equal(me.cls, MAAS_ERR_NOT_FOUND);
        assert_string_equal(
                me.message,
                "MAAS has no subnet 10.99.0.0/24 (its subnets: 10.20.0.0/24, 10.30.0.0/24)");
        maas_error_release(&me);
        o = (struct maas_static_ip){ .ip = "10.20.0.5",
                                     .cidr = "10.20.0.0/24",
                                     .interface = "eth7" };
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, &me), CM_ENOTFOUND);
        assert_string_equal(me.message,
                            "MAAS machine hkd3ps has no interface eth7 (its interfaces: eth0)");
        maas_error_release(&me);
        /* nothing was unlinked on the way */
        assert_int_equal(count_op(f, "unlink_subnet"), 0);
}

static void test_maas_network__gateway_and_nameservers_must_be_the_subnets(void **state)
{
        struct fx *f = *state;
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        static const char *const ns_ok[] = { "10.20.0.2" }, *const ns_bad[] = { "1.1.1.1" };
        struct maas_static_ip o = { .ip = "10.20.0.200",
                                    .cidr = "10.20.0.0/24",
                                    .gateway = "10.20.0.254",
                                    .boot_interface_id = -1 };

        allocate(f, SID_A, &n);
        maas_node_release(&n);
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, &me), CM_EINVAL);
        assert_string_equal(me.message,
                            "gateway 10.20.0.254 is not the gateway of MAAS subnet 10.20.0.0/24 "
                            "(10.20.0.1): MAAS gives a static address its subnet's gateway");
        maas_error_release(&me);
        o.gateway = "10.20.0.1";
        o.nameservers = ns_bad;
        o.n_nameservers = 1;
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, &me), CM_EINVAL);
        assert_string_equal(me.message,
                            "nameserver 1.1.1.1 is not a DNS server of MAAS subnet 10.20.0.0/24 "
                            "(10.20.0.2): MAAS gives a static address its subnet's DNS servers");
        maas_error_release(&me);
        assert_int_equal(count_op(f, "unlink_subnet"), 0); /* refused before any write */
        o.nameservers = ns_ok;
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, NULL), 0);
}

static void test_maas_network__deployed_machine_and_non_admin_are_refused(void **state)
{
        struct fx *f = *state;
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        struct maas_static_ip o = { .ip = "10.20.0.201",
                                    .cidr = "10.20.0.0/24",
                                    .boot_interface_id = -1 };

        assert_int_equal(maas_link_static_ip(f->user2, SID_A, &o, NULL, &me), CM_EFORBIDDEN);
        maas_error_release(&me);
        allocate(f, SID_A, &n);
        maas_node_release(&n);
        assert_int_equal(maas_deploy(f->mc, SID_A,
                                     &(struct maas_deploy_opts){ .image = "ubuntu/jammy" }, NULL,
                                     NULL),
                         0);
        assert_int_equal(maas_link_static_ip(f->mc, SID_A, &o, NULL, &me), CM_ECONFLICT);
        assert_string_equal(me.message, "Cannot unlink subnet interface because the machine is not "
                                        "New, Ready, Allocated, or Broken.");
        maas_error_release(&me);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
                T(test_maas_network__lists_subnets_with_gateway_and_dns),
                T(test_maas_network__boot_interface_starts_with_an_auto_link),
                T(test_maas_network__static_ip_replaces_the_auto_link_and_is_deployed),
                T(test_maas_network__address_in_use_carries_maas_text_and_undo_restores_auto),
                T(test_maas_network__undo_with_nothing_linked_writes_nothing),
                T(test_maas_network__address_outside_the_subnet_is_refused_by_field),
                T(test_maas_network__unknown_subnet_and_interface_name_what_exists),
                T(test_maas_network__gateway_and_nameservers_must_be_the_subnets),
                T(test_maas_network__deployed_machine_and_non_admin_are_refused),
#undef T
        };
        int r;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = cmocka_run_group_tests_name("maas_network", tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}
