/*
 * cidr: addresses through inet_pton / inet_ntop, networks as an address and a prefix, bit
 * tests on the 16-byte network-order form.
 */
#include "cidr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "err.h"

#define IP_TEXT_MAX 46 /* INET6_ADDRSTRLEN */

static unsigned family_bits(int family)
{
        return family == AF_INET ? 32 : 128;
}

int ip_addr_parse(const char *s, struct ip_addr *ret)
{
        struct ip_addr a;

        memset(&a, 0, sizeof(a));
        if (!s)
                return CM_EINVAL;
        if (inet_pton(AF_INET, s, a.b) == 1)
                a.family = AF_INET;
        else if (inet_pton(AF_INET6, s, a.b) == 1)
                a.family = AF_INET6;
        else
                return CM_EINVAL;
        *ret = a;
        return CM_OK;
}

/* A decimal prefix 0..max without sign or leading zero. */
static int prefix_parse(const char *s, unsigned max, unsigned *ret)
{
        unsigned v = 0;
        size_t n = strlen(s);

        if (n == 0 || n > 3 || (n > 1 && s[0] == '0'))
                return CM_EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return CM_EINVAL;
                v = v * 10 + (unsigned)(s[i] - '0');
        }
        if (v > max)
                return CM_EINVAL;
        *ret = v;
        return CM_OK;
}

int cidr_parse(const char *s, struct cidr *ret)
{
        char text[IP_TEXT_MAX];
        const char *slash;
        struct cidr c;

        if (!s)
                return CM_EINVAL;
        slash = strchr(s, '/');
        if (!slash || (size_t)(slash - s) >= sizeof(text))
                return CM_EINVAL;
        memcpy(text, s, (size_t)(slash - s));
        text[slash - s] = '\0';
        memset(&c, 0, sizeof(c));
        if (ip_addr_parse(text, &c.addr) != CM_OK ||
            prefix_parse(slash + 1, family_bits(c.addr.family), &c.prefix) != CM_OK)
                return CM_EINVAL;
        *ret = c;
        return CM_OK;
}

bool ip_addr_equal(const struct ip_addr *a, const struct ip_addr *b)
{
        return a->family == b->family && memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

/* The mask byte of byte i for a prefix. */
static unsigned char mask_byte(unsigned prefix, size_t i)
{
        unsigned bits = i * 8 >= prefix ? 0 : prefix - (unsigned)i * 8;

        return (unsigned char)(bits >= 8 ? 0xffu : (0xffu << (8 - bits)) & 0xffu);
}

static size_t family_bytes(int family)
{
        return family == AF_INET ? 4 : 16;
}

/* True when every host bit of a under prefix is `one` (1) or zero (0). */
static bool host_bits_all(const struct ip_addr *a, unsigned prefix, bool one)
{
        for (size_t i = 0; i < family_bytes(a->family); i++) {
                unsigned char host = (unsigned char)(0xffu & ~(unsigned)mask_byte(prefix, i));

                if ((a->b[i] & host) != (one ? host : 0))
                        return false;
        }
        return true;
}

bool cidr_is_network(const struct cidr *c)
{
        return host_bits_all(&c->addr, c->prefix, false);
}

struct cidr cidr_network(const struct cidr *c)
{
        struct cidr n = *c;

        for (size_t i = 0; i < sizeof(n.addr.b); i++)
                n.addr.b[i] &= mask_byte(c->prefix, i);
        return n;
}

bool cidr_contains(const struct cidr *c, const struct ip_addr *a)
{
        if (a->family != c->addr.family)
                return false;
        for (size_t i = 0; i < family_bytes(a->family); i++)
                if ((a->b[i] ^ c->addr.b[i]) & mask_byte(c->prefix, i))
                        return false;
        return true;
}

bool cidr_equal(const struct cidr *a, const struct cidr *b)
{
        return a->prefix == b->prefix && cidr_contains(a, &b->addr);
}

bool cidr_is_network_address(const struct cidr *c, const struct ip_addr *a)
{
        if (c->prefix + 2 > family_bits(c->addr.family) || !cidr_contains(c, a))
                return false;
        return host_bits_all(a, c->prefix, false);
}

bool cidr_is_broadcast(const struct cidr *c, const struct ip_addr *a)
{
        if (c->addr.family != AF_INET || c->prefix + 2 > 32 || !cidr_contains(c, a))
                return false;
        return host_bits_all(a, c->prefix, true);
}

const char *ip_addr_format(const struct ip_addr *a, char *buf, size_t size)
{
        if (size == 0)
                return buf;
        if (!inet_ntop(a->family, a->b, buf, (socklen_t)size))
                buf[0] = '\0';
        return buf;
}

const char *cidr_format(const struct cidr *c, char *buf, size_t size)
{
        char ip[IP_TEXT_MAX];

        (void)ip_addr_format(&c->addr, ip, sizeof(ip));
        (void)snprintf(buf, size, "%s/%u", ip, c->prefix);
        return buf;
}
