/*
 * capi-sim IPv4 address sets: the in-cluster IPAM provider's pool arithmetic (see capi.h):
 * a pool's spec.addresses (single addresses, a-b ranges, CIDRs) less its excludedAddresses,
 * its subnet's network and broadcast addresses and its gateway.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi.h"
#include "err.h"
#include "json.h"
#include "parse.h"
#include "xalloc.h"

bool capi_ipv4_parse(const char *text, uint32_t *ret)
{
        struct in_addr a;

        if (!text || inet_pton(AF_INET, text, &a) != 1)
                return false;
        *ret = ntohl(a.s_addr);
        return true;
}

void capi_ipv4_format(uint32_t ip, char out[CAPI_IPV4_LEN])
{
        (void)snprintf(out, CAPI_IPV4_LEN, "%u.%u.%u.%u", ip >> 24, (ip >> 16) & 255u,
                       (ip >> 8) & 255u, ip & 255u);
}

static int cmp_range(const void *a, const void *b)
{
        const struct capi_iprange *x = a, *y = b;

        return x->from < y->from ? -1 : x->from > y->from;
}

/* Sorts and merges overlapping or adjacent ranges. */
static void normalize(struct capi_ipset *s)
{
        size_t k = 0;

        if (s->n == 0)
                return;
        qsort(s->r, s->n, sizeof(*s->r), cmp_range);
        for (size_t i = 1; i < s->n; i++) {
                struct capi_iprange *last = &s->r[k];

                if (last->to == UINT32_MAX || s->r[i].from <= last->to + 1) {
                        if (s->r[i].to > last->to)
                                last->to = s->r[i].to;
                } else {
                        s->r[++k] = s->r[i];
                }
        }
        s->n = k + 1;
}

static void push(struct capi_ipset *s, uint32_t from, uint32_t to)
{
        s->r = xrealloc(s->r, (s->n + 1) * sizeof(*s->r));
        s->r[s->n++] = (struct capi_iprange){ from, to };
}

void capi_ipset_add(struct capi_ipset *s, uint32_t from, uint32_t to)
{
        push(s, from, to);
        normalize(s);
}

void capi_ipset_remove(struct capi_ipset *s, uint32_t from, uint32_t to)
{
        struct capi_ipset out = { 0 };

        for (size_t i = 0; i < s->n; i++) {
                struct capi_iprange r = s->r[i];

                if (r.to < from || r.from > to) {
                        push(&out, r.from, r.to);
                        continue;
                }
                if (r.from < from)
                        push(&out, r.from, from - 1);
                if (r.to > to)
                        push(&out, to + 1, r.to);
        }
        free(s->r);
        *s = out;
}

bool capi_ipset_has(const struct capi_ipset *s, uint32_t ip)
{
        for (size_t i = 0; i < s->n; i++)
                if (ip >= s->r[i].from && ip <= s->r[i].to)
                        return true;
        return false;
}

uint64_t capi_ipset_count(const struct capi_ipset *s)
{
        uint64_t n = 0;

        for (size_t i = 0; i < s->n; i++)
                n += (uint64_t)s->r[i].to - s->r[i].from + 1;
        return n;
}

void capi_ipset_release(struct capi_ipset *s)
{
        free(s->r);
        *s = (struct capi_ipset){ 0 };
}

static uint32_t mask_of(unsigned prefix)
{
        return prefix == 0 ? 0 : UINT32_MAX << (32 - prefix);
}

/* "a.b.c.d", "a.b.c.d-e.f.g.h" or "a.b.c.d/n" into *from..*to. */
static bool parse_entry(const char *text, uint32_t *from, uint32_t *to)
{
        const char *dash = strchr(text, '-'), *slash = strchr(text, '/');
        char head[64];
        uint64_t bits = 0;

        if (!dash && !slash) {
                if (!capi_ipv4_parse(text, from))
                        return false;
                *to = *from;
                return true;
        }
        if ((size_t)((dash ? dash : slash) - text) >= sizeof(head))
                return false;
        (void)snprintf(head, sizeof(head), "%.*s", (int)((dash ? dash : slash) - text), text);
        if (!capi_ipv4_parse(head, from))
                return false;
        if (dash)
                return capi_ipv4_parse(dash + 1, to) && *to >= *from;
        if (parse_u64(slash + 1, 0, 32, &bits) != 0)
                return false;
        *from &= mask_of((unsigned)bits);
        *to = *from | ~mask_of((unsigned)bits);
        return true;
}

/* Adds (or, when remove, takes away) every entry of a list of strings at field. */
static int add_list(struct capi_ipset *s,
                    const cJSON *list,
                    const char *field,
                    bool remove,
                    char *why,
                    size_t why_n)
{
        const cJSON *x;
        size_t i = 0;

        if (list && !cJSON_IsArray(list)) {
                (void)snprintf(why, why_n, "spec.%s: not a list", field);
                return CM_EINVAL;
        }
        cJSON_ArrayForEach (x, list) {
                uint32_t from = 0, to = 0;

                if (!cJSON_IsString(x) || !parse_entry(x->valuestring, &from, &to)) {
                        (void)snprintf(why, why_n,
                                       "spec.%s[%zu]: not an IPv4 address, a-b range or CIDR "
                                       "(capi-sim pools are IPv4 only)",
                                       field, i);
                        return CM_EINVAL;
                }
                if (remove)
                        capi_ipset_remove(s, from, to);
                else
                        push(s, from, to);
                i++;
        }
        normalize(s);
        return 0;
}

int capi_pool_parse(const cJSON *spec, struct capi_pool *ret, char *why, size_t why_n)
{
        const cJSON *prefix = json_find(spec, "prefix", NULL);
        const char *gw = json_find_str(spec, "gateway", NULL);
        struct capi_pool p = { 0 };
        int err;

        if (!cJSON_IsNumber(prefix) || prefix->valuedouble < 0 || prefix->valuedouble > 32 ||
            prefix->valuedouble != (double)(int)prefix->valuedouble) {
                (void)snprintf(why, why_n, "spec.prefix: want an integer from 0 to 32");
                return CM_EINVAL;
        }
        p.prefix = (unsigned)prefix->valueint;
        if (gw && *gw && !capi_ipv4_parse(gw, &p.gateway)) {
                (void)snprintf(why, why_n, "spec.gateway: %s is not an IPv4 address", gw);
                return CM_EINVAL;
        }
        p.has_gateway = gw && *gw;
        err = add_list(&p.set, json_find(spec, "addresses", NULL), "addresses", false, why, why_n);
        if (err == 0 && p.set.n == 0) {
                (void)snprintf(why, why_n, "spec.addresses: empty");
                err = CM_EINVAL;
        }
        if (err == 0)
                err = add_list(&p.set, json_find(spec, "excludedAddresses", NULL),
                               "excludedAddresses", true, why, why_n);
        if (err == 0 && !cJSON_IsTrue(json_find(spec, "allocateReservedIPAddresses", NULL)) &&
            p.set.n) {
                /* the subnet of the lowest address: its network and broadcast addresses */
                uint32_t net = p.set.r[0].from & mask_of(p.prefix);

                capi_ipset_remove(&p.set, net, net);
                capi_ipset_remove(&p.set, net | ~mask_of(p.prefix), net | ~mask_of(p.prefix));
        }
        if (err == 0 && p.has_gateway)
                capi_ipset_remove(&p.set, p.gateway, p.gateway);
        if (err) {
                capi_ipset_release(&p.set);
                return err;
        }
        *ret = p;
        return 0;
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

        return x < y ? -1 : x > y;
}

bool capi_pool_first_free(const struct capi_pool *p, uint32_t *used, size_t n_used, uint32_t *ret)
{
        if (n_used)
                qsort(used, n_used, sizeof(*used), cmp_u32);
        for (size_t i = 0; i < p->set.n; i++) {
                uint64_t ip = p->set.r[i].from;

                /* each step skips one used address: at most n_used + 1 steps per range */
                while (ip <= p->set.r[i].to) {
                        uint32_t v = (uint32_t)ip;

                        if (!n_used || !bsearch(&v, used, n_used, sizeof(*used), cmp_u32)) {
                                *ret = v;
                                return true;
                        }
                        ip++;
                }
        }
        return false;
}
