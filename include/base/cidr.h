#pragma once
/*
 * cidr: IPv4 and IPv6 addresses and networks ("10.10.0.0/24", "fd00:20::/64") as values,
 * for the rules about static addresses and for choosing addresses by network (#19). Parsing
 * is strict (inet_pton forms, no spaces, a decimal prefix without leading zeros); a parsed
 * value is plain data. Pure functions; thread-safe; nothing allocates.
 */

#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"

/* Longest text cidr_format writes, with its NUL (an IPv6 address, '/', "128"). */
#define CIDR_TEXT_MAX 50

struct ip_addr {
        int family;          /* AF_INET or AF_INET6 */
        unsigned char b[16]; /* network order; the first 4 for AF_INET */
};

struct cidr {
        struct ip_addr addr; /* as written: host bits may be set (see cidr_is_network) */
        unsigned prefix;     /* 0..32 or 0..128 */
};

/* An IPv4 dotted quad or an IPv6 address (no zone, no brackets). CM_EINVAL otherwise;
 * *ret is written only on success. */
MUST_CHECK int ip_addr_parse(const char *s, struct ip_addr *ret);
/* "<address>/<prefix>". CM_EINVAL otherwise; *ret is written only on success. */
MUST_CHECK int cidr_parse(const char *s, struct cidr *ret);

bool ip_addr_equal(const struct ip_addr *a, const struct ip_addr *b);
/* True when c's host bits are all zero ("10.10.0.0/24", not "10.10.0.5/24"). */
bool cidr_is_network(const struct cidr *c);
/* c with its host bits cleared. */
struct cidr cidr_network(const struct cidr *c);
/* Same network: same family, prefix and network bits (host bits ignored). */
bool cidr_equal(const struct cidr *a, const struct cidr *b);
/* a is inside c (same family, same network bits). */
bool cidr_contains(const struct cidr *c, const struct ip_addr *a);
/* a is c's network address (all host bits zero) on a network that reserves it: IPv4 up to
 * /30 and IPv6 up to /126 (the subnet-router anycast address); never on /31, /32, /127,
 * /128, where every address is usable (RFC 3021). */
bool cidr_is_network_address(const struct cidr *c, const struct ip_addr *a);
/* a is c's IPv4 broadcast address (all host bits one), up to /30. IPv6 has none. */
bool cidr_is_broadcast(const struct cidr *c, const struct ip_addr *a);

/* Canonical text ("10.10.0.0/24", "fd00:20::/64") into buf (size at least CIDR_TEXT_MAX);
 * returns buf. */
const char *cidr_format(const struct cidr *c, char *buf, size_t size);
/* Canonical text of a into buf (size at least CIDR_TEXT_MAX); returns buf. */
const char *ip_addr_format(const struct ip_addr *a, char *buf, size_t size);
