/*
 * Integration: the MAAS client's user reservations (ipaddresses op=reserve / op=release /
 * read) and IP ranges against a real maas-sim on 127.0.0.1, whose answers follow MAAS's
 * (tests/sim/maas/ipaddresses.c): outside every subnet, already reserved, in use by a
 * machine, inside a dynamic range; and a reserved address is handed to no machine (deploy's
 * AUTO address, link_subnet STATIC). Each test starts its own maas-sim.
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

#include "err.h"
#include "json.h"
#include "maas_client.h"
#include "maassim.h"
#include "testutil.h"
#include "xalloc.h"

#define ADMIN_KEY "ck:tk:secret1"
#define USER2_KEY "ck2:tk2:secret2"

/* The sample inventory's first machine: eth0 10.20.0.10 on 10.20.0.0/24 (gateway .1,
 * dynamic range .230-.239). */
#define SID_A "hkd3ps"
#define IP_A  "10.20.0.10"

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

        if (maassim_start(&f->sim, ADMIN_KEY,
                          (const char *const[]){ "--api-key", USER2_KEY, "--deploy-seconds", "0.2",
                                                 "--release-seconds", "0.1", NULL }) < 0) {
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

/* A refused reserve: the code and MAAS's message. */
static void reserve_refused(struct maas_client *mc,
                            const struct maas_reserve_ip *o,
                            int code,
                            long status,
                            const char *message)
{
        struct maas_ip_address a = { 0 };
        struct maas_error me = { 0 };

        assert_int_equal(maas_reserve_ip(mc, o, &a, &me), code);
        assert_int_equal(me.http_status, status);
        assert_non_null(me.message);
        if (!strstr(me.message, message))
                fail_msg("MAAS said \"%s\", not \"%s\"", me.message, message);
        maas_error_release(&me);
}

static void test_ipaddresses__reserve_read_release(void **state)
{
        struct fx *f = *state;
        struct maas_ip_address a = { 0 };
        struct maas_ip_address_list l = { 0 };
        struct maas_error me = { 0 };

        assert_int_equal(maas_reserve_ip(f->user2, &(struct maas_reserve_ip){ .ip = "10.20.0.100" },
                                         &a, NULL),
                         0);
        assert_string_equal(a.ip, "10.20.0.100");
        assert_int_equal(a.alloc_type, MAAS_ALLOC_USER_RESERVED);
        assert_string_equal(a.owner, "user2");
        assert_string_equal(a.subnet_cidr, "10.20.0.0/24");
        maas_ip_address_release(&a);
        /* the owner reads it by address; another user does not see it, an admin with all */
        assert_int_equal(maas_list_ip_addresses(f->user2, "10.20.0.100", false, &l, NULL), 0);
        assert_int_equal(l.n, 1);
        maas_ip_address_list_release(&l);
        assert_int_equal(maas_list_ip_addresses(f->mc, "10.20.0.100", false, &l, NULL), 0);
        assert_int_equal(l.n, 0);
        maas_ip_address_list_release(&l);
        assert_int_equal(maas_list_ip_addresses(f->mc, NULL, true, &l, NULL), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0].owner, "user2");
        maas_ip_address_list_release(&l);
        assert_int_equal(maas_list_ip_addresses(f->user2, NULL, true, &l, &me), CM_EFORBIDDEN);
        maas_error_release(&me);
        /* only its owner releases it */
        assert_int_equal(maas_release_ip(f->mc, "10.20.0.100", &me), CM_EINVAL);
        assert_non_null(strstr(me.message, "does not belong to the requesting user"));
        maas_error_release(&me);
        assert_int_equal(maas_release_ip(f->user2, "10.20.0.100", NULL), 0);
        assert_int_equal(maas_list_ip_addresses(f->user2, NULL, false, &l, NULL), 0);
        assert_int_equal(l.n, 0);
        maas_ip_address_list_release(&l);
        assert_int_equal(maas_release_ip(f->user2, "10.20.0.100", &me), CM_EINVAL);
        maas_error_release(&me);
}

/* A reserve with a hostname puts the address in the DNS resource of that name (the default
 * domain without a dot), found by name alone (every domain); the release deletes the record
 * it leaves empty, as MAAS's orphan clean-up does; an unknown domain is MAAS's 404. */
static void test_ipaddresses__hostname_record_follows_the_reservation(void **state)
{
        struct fx *f = *state;
        struct maas_ip_address a = { 0 };
        struct maas_dns_list l = { 0 };
        struct maas_error me = { 0 };

        assert_int_equal(maas_reserve_ip(f->user2,
                                         &(struct maas_reserve_ip){ .ip = "10.20.0.101",
                                                                    .hostname = "capmaas-vip-u1" },
                                         &a, NULL),
                         0);
        maas_ip_address_release(&a);
        assert_int_equal(maas_list_dns_resources_named(f->user2, "capmaas-vip-u1", &l, NULL), 0);
        assert_int_equal(l.n, 1);
        assert_string_equal(l.items[0].fqdn, "capmaas-vip-u1.maas");
        assert_int_equal(l.items[0].ips.n, 1);
        assert_string_equal(l.items[0].ips.v[0], "10.20.0.101");
        maas_dns_list_release(&l);
        assert_int_equal(maas_list_dns_resources_named(f->user2, "capmaas-vip-u2", &l, NULL), 0);
        assert_int_equal(l.n, 0);
        maas_dns_list_release(&l);
        assert_int_equal(maas_release_ip(f->user2, "10.20.0.101", NULL), 0);
        assert_int_equal(maas_list_dns_resources_named(f->user2, "capmaas-vip-u1", &l, NULL), 0);
        assert_int_equal(l.n, 0);
        maas_dns_list_release(&l);
        assert_int_equal(maas_reserve_ip(f->user2,
                                         &(struct maas_reserve_ip){ .ip = "10.20.0.102",
                                                                    .hostname = "vip.nowhere" },
                                         &a, &me),
                         CM_ENOTFOUND);
        maas_error_release(&me);
}

/* PUT tags/<name>/ replaces the comment; DELETE tags/<name>/ removes the tag from MAAS and
 * from its machines; both 404 for a tag that is not there; both admin only. */
static void test_ipaddresses__tag_comment_and_delete(void **state)
{
        struct fx *f = *state;
        struct maas_named_list l = { 0 };
        struct maas_node_list ms = { 0 };
        struct maas_error me = { 0 };
        const char *const one[] = { "kept-x" };
        const char *const add[] = { "hkd3ps" };
        bool seen = false;

        assert_int_equal(maas_create_tag(f->mc, "kept-x", "first", NULL), 0);
        assert_int_equal(maas_tag_update_nodes(f->mc, "kept-x", add, 1, NULL, 0, NULL), 0);
        assert_int_equal(maas_update_tag_comment(f->mc, "kept-x", "second; held since: x", NULL),
                         0);
        assert_int_equal(maas_update_tag_comment(f->user2, "kept-x", "no", &me), CM_EFORBIDDEN);
        maas_error_release(&me);
        assert_int_equal(maas_list_tags(f->mc, &l, NULL), 0);
        for (size_t i = 0; i < l.n; i++)
                if (strcmp(l.items[i].name, "kept-x") == 0) {
                        assert_string_equal(l.items[i].description, "second; held since: x");
                        seen = true;
                }
        assert_true(seen);
        maas_named_list_release(&l);
        assert_int_equal(maas_delete_tag(f->user2, "kept-x", &me), CM_EFORBIDDEN);
        maas_error_release(&me);
        assert_int_equal(maas_delete_tag(f->mc, "kept-x", NULL), 0);
        assert_int_equal(maas_delete_tag(f->mc, "kept-x", &me), CM_ENOTFOUND);
        maas_error_release(&me);
        assert_int_equal(maas_update_tag_comment(f->mc, "kept-x", "gone", &me), CM_ENOTFOUND);
        maas_error_release(&me);
        /* no machine carries it: the filter names an unknown tag now */
        assert_int_equal(maas_list_machines(f->mc,
                                            &(struct maas_node_filter){ .tags = one, .n_tags = 1 },
                                            &ms, &me),
                         CM_EINVAL);
        maas_error_release(&me);
        maas_node_list_release(&ms);
}

static void test_ipaddresses__maas_refusals(void **state)
{
        struct fx *f = *state;
        struct maas_ip_address a = { 0 };

        reserve_refused(f->mc, &(struct maas_reserve_ip){ .ip = "192.0.2.7" }, CM_EINVAL, 400,
                        "No known subnet for IP address: 192.0.2.7.");
        reserve_refused(f->mc, &(struct maas_reserve_ip){ .subnet = "10.99.0.0/24" }, CM_EINVAL,
                        400, "Unable to identify subnet: 10.99.0.0/24.");
        reserve_refused(f->mc, &(struct maas_reserve_ip){ 0 }, CM_EINVAL, 400,
                        "Must supply either the 'subnet' or the 'ip' parameter.");
        reserve_refused(f->mc, &(struct maas_reserve_ip){ .ip = "10.20.0.233" }, CM_EFORBIDDEN, 403,
                        "belongs to an existing dynamic range");
        assert_int_equal(
                maas_reserve_ip(f->mc, &(struct maas_reserve_ip){ .ip = "10.20.0.100" }, &a, NULL),
                0);
        maas_ip_address_release(&a);
        reserve_refused(f->user2, &(struct maas_reserve_ip){ .ip = "10.20.0.100" }, CM_ENOTFOUND,
                        404, "The IP address 10.20.0.100 is already in use.");
}

/* A reservation of the address a machine would take on deploy: the machine gets another,
 * and a STATIC link to it is refused; once the machine holds an address, that one cannot be
 * reserved. */
static void test_ipaddresses__reserved_address_goes_to_no_machine(void **state)
{
        struct fx *f = *state;
        struct maas_ip_address a = { 0 };
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };

        assert_int_equal(maas_reserve_ip(f->mc, &(struct maas_reserve_ip){ .ip = IP_A }, &a, NULL),
                         0);
        maas_ip_address_release(&a);
        assert_int_equal(maas_link_static_ip(f->mc, "eccapw",
                                             &(struct maas_static_ip){ .interface = "eth0",
                                                                       .ip = IP_A,
                                                                       .cidr = "10.20.0.0/24" },
                                             NULL, &me),
                         CM_ENOTFOUND);
        assert_non_null(strstr(me.message, "already in use"));
        maas_error_release(&me);
        assert_int_equal(
                maas_allocate(f->mc, &(struct maas_allocate_opts){ .system_id = SID_A }, &n, NULL),
                0);
        maas_node_release(&n);
        assert_int_equal(maas_deploy(f->mc, SID_A,
                                     &(struct maas_deploy_opts){ .image = "ubuntu/jammy" }, &n,
                                     NULL),
                         0);
        assert_int_equal(n.ip_addresses.n, 1);
        assert_string_not_equal(n.ip_addresses.v[0], IP_A);
        /* what it got instead is the machine's: in use for a reservation */
        reserve_refused(f->user2, &(struct maas_reserve_ip){ .ip = n.ip_addresses.v[0] },
                        CM_ENOTFOUND, 404, "is already in use.");
        maas_node_release(&n);
}

/* A subnet's reservation: MAAS picks a free address (not the network, gateway, a machine's,
 * a reserved one or the dynamic range). */
static void test_ipaddresses__subnet_pick_and_ranges(void **state)
{
        struct fx *f = *state;
        struct maas_ip_address a = { 0 }, b = { 0 };
        struct maas_ip_range_list r = { 0 };

        assert_int_equal(
                maas_reserve_ip(f->mc, &(struct maas_reserve_ip){ .subnet = "public" }, &a, NULL),
                0);
        assert_string_equal(a.ip, "10.30.0.2");
        assert_int_equal(maas_reserve_ip(f->mc,
                                         &(struct maas_reserve_ip){ .subnet = "10.30.0.0/24" }, &b,
                                         NULL),
                         0);
        assert_string_equal(b.ip, "10.30.0.3");
        maas_ip_address_release(&a);
        maas_ip_address_release(&b);
        assert_int_equal(maas_list_ip_ranges(f->mc, &r, NULL), 0);
        assert_int_equal(r.n, 1);
        assert_string_equal(r.items[0].type, "dynamic");
        assert_string_equal(r.items[0].start_ip, "10.20.0.230");
        assert_string_equal(r.items[0].end_ip, "10.20.0.239");
        assert_string_equal(r.items[0].subnet_cidr, "10.20.0.0/24");
        maas_ip_range_list_release(&r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_ipaddresses__reserve_read_release, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_ipaddresses__maas_refusals, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_ipaddresses__hostname_record_follows_the_reservation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ipaddresses__tag_comment_and_delete, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_ipaddresses__reserved_address_goes_to_no_machine, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ipaddresses__subnet_pick_and_ranges, setup,
                                                teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
