/* Unit tests for cidr: parsing (strict forms, both families), containment, the network and
 * broadcast addresses by prefix length, equality across spellings and the canonical text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "cidr.h"
#include "err.h"

/* Parsed values in rings that outlive one assertion (at most RING values each). */
#define RING 8

static const struct cidr *net(const char *s)
{
        static struct cidr ring[RING];
        static size_t i;
        struct cidr *c = &ring[i++ % RING];

        if (cidr_parse(s, c) != CM_OK)
                fail_msg("cidr_parse(%s) failed", s);
        return c;
}

static const struct ip_addr *ip(const char *s)
{
        static struct ip_addr ring[RING];
        static size_t i;
        struct ip_addr *a = &ring[i++ % RING];

        if (ip_addr_parse(s, a) != CM_OK)
                fail_msg("ip_addr_parse(%s) failed", s);
        return a;
}

static void test_cidr__parses_both_families_strictly(void **state)
{
        static const char *const bad[] = {
                "",
                "10.0.0.0",
                "10.0.0.0/",
                "10.0.0.0/33",
                "10.0.0.0/024",
                "10.0.0.0/-1",
                "10.0.0.0/+8",
                " 10.0.0.0/8",
                "10.0.0.0/8 ",
                "10.0.0/8",
                "10.0.0.256/8",
                "fd00::/129",
                "fd00::/1x",
                "/8",
                "host/8",
                "10.0.0.0/8/8",
                "fe80::1%eth0/64",
        };
        struct cidr c;
        struct ip_addr a;

        (void)state;
        assert_int_equal(cidr_parse("10.10.0.0/24", &c), CM_OK);
        assert_int_equal(c.addr.family, AF_INET);
        assert_int_equal(c.prefix, 24);
        assert_int_equal(cidr_parse("fd00:20::/64", &c), CM_OK);
        assert_int_equal(c.addr.family, AF_INET6);
        assert_int_equal(c.prefix, 64);
        assert_int_equal(cidr_parse("0.0.0.0/0", &c), CM_OK);
        assert_int_equal(cidr_parse("::/0", &c), CM_OK);
        assert_int_equal(cidr_parse("10.0.0.1/32", &c), CM_OK);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (cidr_parse(bad[i], &c) != CM_EINVAL)
                        fail_msg("accepted %s", bad[i]);
        assert_int_equal(cidr_parse(NULL, &c), CM_EINVAL);
        assert_int_equal(ip_addr_parse("10.10.0.21", &a), CM_OK);
        assert_int_equal(ip_addr_parse("2001:db8::1", &a), CM_OK);
        assert_int_equal(ip_addr_parse("10.10.0.21/32", &a), CM_EINVAL);
        assert_int_equal(ip_addr_parse("010.10.0.21", &a), CM_EINVAL);
        assert_int_equal(ip_addr_parse("eth0", &a), CM_EINVAL);
        assert_int_equal(ip_addr_parse("", &a), CM_EINVAL);
}

static void test_cidr__containment_by_network_bits(void **state)
{
        (void)state;
        assert_true(cidr_contains(net("10.10.0.0/24"), ip("10.10.0.21")));
        assert_true(cidr_contains(net("10.10.0.0/24"), ip("10.10.0.255")));
        assert_false(cidr_contains(net("10.10.0.0/24"), ip("10.10.1.21")));
        assert_false(cidr_contains(net("10.10.0.0/24"), ip("::ffff:10.10.0.21")));
        assert_true(cidr_contains(net("fd00:20::/64"), ip("fd00:20::21")));
        assert_false(cidr_contains(net("fd00:20::/64"), ip("fd00:21::21")));
        assert_false(cidr_contains(net("fd00:20::/64"), ip("10.10.0.21")));
        assert_true(cidr_contains(net("10.10.0.128/25"), ip("10.10.0.200")));
        assert_false(cidr_contains(net("10.10.0.128/25"), ip("10.10.0.127")));
        assert_true(cidr_contains(net("10.10.0.0/23"), ip("10.10.1.200")));
        assert_true(cidr_contains(net("0.0.0.0/0"), ip("192.0.2.1")));
}

static void test_cidr__network_and_broadcast_addresses(void **state)
{
        (void)state;
        assert_true(cidr_is_network_address(net("10.10.0.0/24"), ip("10.10.0.0")));
        assert_false(cidr_is_network_address(net("10.10.0.0/24"), ip("10.10.0.1")));
        assert_true(cidr_is_broadcast(net("10.10.0.0/24"), ip("10.10.0.255")));
        assert_false(cidr_is_broadcast(net("10.10.0.0/24"), ip("10.10.0.254")));
        assert_false(cidr_is_broadcast(net("10.10.0.0/24"), ip("10.10.1.255")));
        assert_true(cidr_is_broadcast(net("10.10.0.0/23"), ip("10.10.1.255")));
        assert_false(cidr_is_broadcast(net("10.10.0.0/23"), ip("10.10.0.255")));
        assert_true(cidr_is_network_address(net("10.10.0.4/30"), ip("10.10.0.4")));
        assert_true(cidr_is_broadcast(net("10.10.0.4/30"), ip("10.10.0.7")));
        /* point-to-point links use both addresses (RFC 3021) */
        assert_false(cidr_is_network_address(net("10.10.0.0/31"), ip("10.10.0.0")));
        assert_false(cidr_is_broadcast(net("10.10.0.0/31"), ip("10.10.0.1")));
        assert_false(cidr_is_network_address(net("10.10.0.1/32"), ip("10.10.0.1")));
        assert_true(cidr_is_network_address(net("fd00:20::/64"), ip("fd00:20::")));
        assert_false(cidr_is_broadcast(net("fd00:20::/64"), ip("fd00:20::ffff:ffff:ffff:ffff")));
}

static void test_cidr__network_equality_and_canonical_text(void **state)
{
        struct cidr host = *net("10.10.0.21/24");
        struct cidr n;
        char buf[CIDR_TEXT_MAX];

        (void)state;
        assert_false(cidr_is_network(&host));
        assert_true(cidr_is_network(net("10.10.0.0/24")));
        assert_true(cidr_is_network(net("fd00:20::/64")));
        assert_false(cidr_is_network(net("fd00:20::1/64")));
        n = cidr_network(&host);
        assert_string_equal(cidr_format(&n, buf, sizeof(buf)), "10.10.0.0/24");
        assert_true(cidr_equal(&host, &n));
        assert_false(cidr_equal(&n, net("10.10.0.0/25")));
        assert_true(cidr_equal(net("fd00:0020:0:0::/64"), net("fd00:20::/64")));
        assert_false(cidr_equal(net("0.0.0.0/0"), net("::/0")));
        assert_string_equal(cidr_format(net("fd00:0020:0:0::/64"), buf, sizeof(buf)),
                            "fd00:20::/64");
        assert_string_equal(ip_addr_format(ip("10.10.0.21"), buf, sizeof(buf)), "10.10.0.21");
        assert_true(ip_addr_equal(ip("fd00::1"), ip("fd00:0::0:1")));
        assert_false(ip_addr_equal(ip("10.0.0.1"), ip("10.0.0.2")));
        assert_string_equal(
                cidr_format(net("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"), buf, sizeof(buf)),
                "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cidr__parses_both_families_strictly),
                cmocka_unit_test(test_cidr__containment_by_network_bits),
                cmocka_unit_test(test_cidr__network_and_broadcast_addresses),
                cmocka_unit_test(test_cidr__network_equality_and_canonical_text),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
