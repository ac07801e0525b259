/*
 * maas_inventory_net: subnets by CIDR (compared as networks, so MAAS's "fd00:20::/64"
 * matches a user's "fd00:0020::/64") and the addresses machines hold, canonicalised and
 * sorted for a binary search.
 */
#include "maas_inventory_net.h"

#include <stdlib.h>
#include <string.h>

#include "cidr.h"
#include "xalloc.h"

static void subnets_build(struct maas_inventory_snapshot *s, const struct maas_subnet_list *l)
{
        s->subnets = xcalloc(l->n ? l->n : 1, sizeof(*s->subnets));
        for (size_t i = 0; i < l->n; i++) {
                s->subnets[i].cidr = xstrdup(l->items[i].cidr);
                s->subnets[i].name = xstrdup(l->items[i].name ? l->items[i].name : "");
                s->subnets[i].gateway_ip =
                        l->items[i].gateway_ip ? xstrdup(l->items[i].gateway_ip) : NULL;
        }
        s->n_subnets = l->n;
}

/* Canonical text of ip into buf, or NULL when it is no address. */
static const char *canonical(const char *ip, char *buf, size_t size)
{
        struct ip_addr a;

        if (ip_addr_parse(ip, &a) != 0)
                return NULL;
        return ip_addr_format(&a, buf, size);
}

struct ips_acc {
        struct maas_inv_ip *v;
        size_t n, cap;
};

static void ips_add(struct ips_acc *acc, const char *ip, size_t machine)
{
        char buf[CIDR_TEXT_MAX];
        const char *c = ip ? canonical(ip, buf, sizeof(buf)) : NULL;

        if (!c)
                return;
        if (acc->n == acc->cap) {
                acc->cap = acc->cap ? acc->cap * 2 : 64;
                acc->v = xrealloc(acc->v, acc->cap * sizeof(*acc->v));
        }
        acc->v[acc->n++] = (struct maas_inv_ip){ xstrdup(c), machine };
}

static int cmp_ip(const void *a, const void *b)
{
        const struct maas_inv_ip *x = a, *y = b;
        int d = strcmp(x->ip, y->ip);

        if (d)
                return d;
        return x->machine < y->machine ? -1 : x->machine > y->machine;
}

static void node_ips(struct ips_acc *acc, const struct maas_node *nd, size_t machine)
{
        for (size_t i = 0; i < nd->ip_addresses.n; i++)
                ips_add(acc, nd->ip_addresses.v[i], machine);
}

static void reserved_add(struct maas_inventory_snapshot *s,
                         const struct maas_ip_address *a,
                         bool mine)
{
        char buf[CIDR_TEXT_MAX];
        const char *c = a->ip ? canonical(a->ip, buf, sizeof(buf)) : NULL;

        if (!c || (a->alloc_type >= 0 && a->alloc_type != MAAS_ALLOC_USER_RESERVED))
                return;
        for (size_t i = 0; i < s->n_reserved; i++)
                if (strcmp(s->reserved[i].ip, c) == 0)
                        return; /* listed as mine first */
        s->reserved = xrealloc(s->reserved, (s->n_reserved + 1) * sizeof(*s->reserved));
        s->reserved[s->n_reserved++] = (struct maas_inv_reserved){
                .ip = xstrdup(c), .owner = a->owner ? xstrdup(a->owner) : NULL, .mine = mine
        };
}

/* The reservations (a few per cluster: searched in order) and the IP ranges. */
static void addresses_build(struct maas_inventory_snapshot *s, const struct maas_inventory_lists *l)
{
        for (size_t i = 0; i < l->reserved_mine.n; i++)
                reserved_add(s, &l->reserved_mine.items[i], true);
        for (size_t i = 0; i < l->reserved_all.n; i++)
                reserved_add(s, &l->reserved_all.items[i], false);
        s->ranges = xcalloc(l->ranges.n ? l->ranges.n : 1, sizeof(*s->ranges));
        for (size_t i = 0; i < l->ranges.n; i++)
                s->ranges[i] = (struct maas_inv_range){
                        .type = xstrdup(l->ranges.items[i].type ? l->ranges.items[i].type : ""),
                        .start_ip = xstrdup(l->ranges.items[i].start_ip),
                        .end_ip = xstrdup(l->ranges.items[i].end_ip),
                };
        s->n_ranges = l->ranges.n;
}

void maas_inv_net_build(struct maas_inventory_snapshot *s, const struct maas_inventory_lists *l)
{
        struct ips_acc acc = { 0 };

        s->has_subnets = !l->no_subnets;
        subnets_build(s, &l->subnets);
        for (size_t i = 0; i < l->machines.n && i < s->n_machines; i++)
                node_ips(&acc, &l->machines.items[i], i);
        if (acc.n > 1)
                qsort(acc.v, acc.n, sizeof(*acc.v), cmp_ip);
        s->ips = acc.v;
        s->n_ips = acc.n;
        addresses_build(s, l);
}

const struct maas_inv_reserved *maas_inv_reservation(const struct maas_inventory_snapshot *s,
                                                     const char *ip)
{
        char buf[CIDR_TEXT_MAX];
        const char *c = ip ? canonical(ip, buf, sizeof(buf)) : NULL;

        for (size_t i = 0; c && i < s->n_reserved; i++)
                if (strcmp(s->reserved[i].ip, c) == 0)
                        return &s->reserved[i];
        return NULL;
}

void maas_inv_net_free(struct maas_inventory_snapshot *s)
{
        for (size_t i = 0; i < s->n_subnets; i++) {
                free(s->subnets[i].cidr);
                free(s->subnets[i].name);
                free(s->subnets[i].gateway_ip);
        }
        for (size_t i = 0; i < s->n_reserved; i++) {
                free(s->reserved[i].ip);
                free(s->reserved[i].owner);
        }
        free(s->reserved);
        for (size_t i = 0; i < s->n_ranges; i++) {
                free(s->ranges[i].type);
                free(s->ranges[i].start_ip);
                free(s->ranges[i].end_ip);
        }
        free(s->ranges);
        free(s->subnets);
        for (size_t i = 0; i < s->n_ips; i++)
                free(s->ips[i].ip);
        free(s->ips);
}

long maas_inv_find_subnet(const struct maas_inventory_snapshot *s, const char *cidr)
{
        struct cidr want, have;

        if (!cidr || cidr_parse(cidr, &want) != 0)
                return -1;
        for (size_t i = 0; i < s->n_subnets; i++)
                if (cidr_parse(s->subnets[i].cidr, &have) == 0 && cidr_equal(&want, &have))
                        return (long)i;
        return -1;
}

static int cmp_key(const void *key, const void *elem)
{
        return strcmp(key, ((const struct maas_inv_ip *)elem)->ip);
}

const struct maas_inv_machine *maas_inv_ip_holder(const struct maas_inventory_snapshot *s,
                                                  const char *ip)
{
        char buf[CIDR_TEXT_MAX];
        const char *c = ip ? canonical(ip, buf, sizeof(buf)) : NULL;
        const struct maas_inv_ip *hit;

        if (!c || s->n_ips == 0)
                return NULL;
        hit = bsearch(c, s->ips, s->n_ips, sizeof(*s->ips), cmp_key);
        return hit ? &s->machines[hit->machine] : NULL;
}
