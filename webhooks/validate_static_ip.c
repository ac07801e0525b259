/*
 * validate_static_ip: the rules of the static-address fields (#19, docs/static-ips.md):
 * MaasMachine spec.staticIP and spec.addressesFromPools, MaasCluster
 * spec.dnsRecordAddresses; their immutability on a MaasMachine; and the MAAS checks of
 * staticIP against the inventory snapshot (the CIDR is a MAAS subnet, the address is not
 * held by another machine).
 */
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "cidr.h"
#include "field_errors.h"
#include "json.h"
#include "maas_inventory.h"
#include "validate.h"
#include "validate_rules.h"
#include "xalloc.h"

#define IFACE_NAME_MAX  15 /* Linux IFNAMSIZ - 1 */
#define NAMESERVERS_MAX 16
#define POOLS_MAX       8
#define KIND_MAX        63
#define SUBNETS_LISTED  10

#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

/* "<path>.<a>" or "<path>.<a>.<b>" (b may be NULL) into p. */
static const char *at2(struct json_path *p, const char *path, const char *a, const char *b)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, a);
        if (b)
                (void)json_path_push_field(p, b);
        return json_path_str(p);
}

static bool only(const char *s, const char *set)
{
        return strspn(s, set) == strlen(s);
}

/* An interface name as Linux (and so MAAS) takes it, when set. */
static void rule_interface(struct field_errors *fe, const char *field, const char *s)
{
        if (!s)
                return;
        if (!s[0] || strlen(s) > IFACE_NAME_MAX || !only(s, ALNUM ".-_") || strcmp(s, ".") == 0 ||
            strcmp(s, "..") == 0)
                field_invalid_str(fe, field, s,
                                  "must be an interface name: 1-%d letters, digits, '.', '-' "
                                  "and '_'",
                                  IFACE_NAME_MAX);
}

/* A CIDR that names a network: required, well formed, no host bits. On success *ret holds
 * it and true is returned. */
static bool rule_cidr(struct field_errors *fe, const char *field, const char *s, struct cidr *ret)
{
        char buf[CIDR_TEXT_MAX];
        struct cidr n;

        if (!s || !s[0]) {
                field_required(fe, field);
                return false;
        }
        if (cidr_parse(s, ret) != 0) {
                field_invalid_str(fe, field, s,
                                  "must be a CIDR: an IPv4 or IPv6 network and a prefix length "
                                  "(e.g. 10.10.0.0/24)");
                return false;
        }
        if (!cidr_is_network(ret)) {
                n = cidr_network(ret);
                field_invalid_str(fe, field, s,
                                  "must be a network address: the host bits are set (the network "
                                  "is %s)",
                                  cidr_format(&n, buf, sizeof(buf)));
                return false;
        }
        return true;
}

/* An address: required when `required`, an IPv4 or IPv6 address. */
static bool rule_ip(struct field_errors *fe,
                    const char *field,
                    const char *s,
                    bool required,
                    struct ip_addr *ret)
{
        if (!s || !s[0]) {
                if (required)
                        field_required(fe, field);
                else if (s)
                        field_invalid_str(fe, field, s, "must be an IPv4 or IPv6 address");
                return false;
        }
        if (ip_addr_parse(s, ret) != 0) {
                field_invalid_str(fe, field, s, "must be an IPv4 or IPv6 address");
                return false;
        }
        return true;
}

/* The address ip (already valid) against the network c. */
static void rule_in_network(struct field_errors *fe,
                            const char *field,
                            const char *text,
                            const struct ip_addr *ip,
                            const struct cidr *c,
                            const char *cidr_field,
                            bool host)
{
        char buf[CIDR_TEXT_MAX];

        (void)cidr_format(c, buf, sizeof(buf));
        if (!cidr_contains(c, ip))
                field_invalid_str(fe, field, text, "must be inside %s (%s)", cidr_field, buf);
        else if (host && cidr_is_network_address(c, ip))
                field_invalid_str(fe, field, text, "must not be the network address of %s", buf);
        else if (host && cidr_is_broadcast(c, ip))
                field_invalid_str(fe, field, text, "must not be the broadcast address of %s", buf);
}

static void rule_nameservers(struct field_errors *fe, const char *path, const struct schema_strv *v)
{
        struct json_path p;
        struct ip_addr a;
        size_t mark;

        if (v->n > NAMESERVERS_MAX) {
                char *n = xasprintf("%zu", v->n);

                field_errors_add(fe, FIELD_ERR_TOO_MANY, at2(&p, path, "staticIP", "nameservers"),
                                 n, "must have at most %d items", NAMESERVERS_MAX);
                free(n);
                return;
        }
        for (size_t i = 0; i < v->n; i++) {
                (void)at2(&p, path, "staticIP", "nameservers");
                mark = json_path_push_index(&p, i);
                (void)rule_ip(fe, json_path_str(&p), v->items[i], false, &a);
                json_path_pop(&p, mark);
        }
}

void validate_static_ip(const struct schema_static_ip *s, const char *path, struct field_errors *fe)
{
        struct json_path p, q;
        struct ip_addr ip, gw;
        struct cidr net;
        bool have_net;

        have_net = rule_cidr(fe, at2(&p, path, "staticIP", "cidr"), s->cidr, &net);
        if (rule_ip(fe, at2(&p, path, "staticIP", "ip"), s->ip, true, &ip) && have_net)
                rule_in_network(fe, at2(&p, path, "staticIP", "ip"), s->ip, &ip, &net,
                                at2(&q, path, "staticIP", "cidr"), true);
        if (rule_ip(fe, at2(&p, path, "staticIP", "gateway"), s->gateway, false, &gw) && have_net) {
                rule_in_network(fe, at2(&p, path, "staticIP", "gateway"), s->gateway, &gw, &net,
                                at2(&q, path, "staticIP", "cidr"), false);
                if (s->ip && ip_addr_parse(s->ip, &ip) == 0 && ip_addr_equal(&ip, &gw))
                        field_invalid_str(fe, at2(&p, path, "staticIP", "gateway"), s->gateway,
                                          "must not be the machine's own address");
        }
        rule_nameservers(fe, path, &s->nameservers);
        rule_interface(fe, at2(&p, path, "staticIP", "interface"), s->interface);
}

/* A Kubernetes kind: a letter, then letters and digits. */
static bool is_kind(const char *s)
{
        bool letter = (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z');

        return letter && strlen(s) <= KIND_MAX && only(s, ALNUM);
}

static void rule_pool_ref(struct field_errors *fe,
                          const struct schema_pool_ref *r,
                          struct json_path *p)
{
        size_t mark;

        mark = json_path_push_field(p, "apiGroup");
        if (!r->api_group || !r->api_group[0])
                field_required(fe, json_path_str(p));
        else if (!rule_is_dns_name(r->api_group))
                field_invalid_str(fe, json_path_str(p), r->api_group,
                                  "must be an API group: a lowercase RFC 1123 subdomain (e.g. "
                                  "ipam.cluster.x-k8s.io)");
        json_path_pop(p, mark);
        mark = json_path_push_field(p, "kind");
        if (!r->kind || !r->kind[0])
                field_required(fe, json_path_str(p));
        else if (!is_kind(r->kind))
                field_invalid_str(fe, json_path_str(p), r->kind,
                                  "must be a kind: a letter, then letters and digits (e.g. "
                                  "InClusterIPPool)");
        json_path_pop(p, mark);
        mark = json_path_push_field(p, "name");
        if (!r->name || !r->name[0])
                field_required(fe, json_path_str(p));
        else if (!rule_is_dns_name(r->name))
                field_invalid_str(fe, json_path_str(p), r->name,
                                  "must be a lowercase RFC 1123 subdomain (the pool's name)");
        json_path_pop(p, mark);
}

void validate_pool_refs(const struct schema_pool_refs *r,
                        const char *path,
                        struct field_errors *fe,
                        struct admission_response *warn)
{
        struct json_path p;
        size_t mark;

        if (r->n > POOLS_MAX) {
                char *n = xasprintf("%zu", r->n);

                field_errors_add(fe, FIELD_ERR_TOO_MANY, at2(&p, path, "addressesFromPools", NULL),
                                 n, "must have at most %d items", POOLS_MAX);
                free(n);
                return;
        }
        for (size_t i = 0; i < r->n; i++) {
                (void)at2(&p, path, "addressesFromPools", NULL);
                mark = json_path_push_index(&p, i);
                rule_pool_ref(fe, &r->items[i], &p);
                json_path_pop(&p, mark);
        }
        if (warn && r->n > 1)
                admission_response_warn(warn,
                                        "%s.addressesFromPools: only the first pool is used "
                                        "(%zu are listed)",
                                        path, r->n);
}

void validate_machine_addresses(const struct maas_machine_spec *s,
                                const char *path,
                                struct field_errors *fe,
                                struct admission_response *warn)
{
        struct json_path p;

        if (s->static_ip)
                validate_static_ip(s->static_ip, path, fe);
        if (s->addresses_from_pools.present)
                validate_pool_refs(&s->addresses_from_pools, path, fe, warn);
        if (s->static_ip && s->addresses_from_pools.n > 0)
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, at2(&p, path, "addressesFromPools", NULL),
                                 NULL,
                                 "may not be set together with %s.staticIP: the machine's "
                                 "address comes from one of them",
                                 path);
}

void validate_template_static_ip(const struct maas_machine_spec *s,
                                 const char *path,
                                 struct admission_response *warn)
{
        if (s->static_ip && warn)
                admission_response_warn(warn,
                                        "%s.staticIP: every machine made from this template asks "
                                        "for %s, and only one can hold it: one replica only, and a "
                                        "rollout that creates the new machine before deleting the "
                                        "old one waits for its address; %s.addressesFromPools "
                                        "gives each machine its own",
                                        path, s->static_ip->ip ? s->static_ip->ip : "one address",
                                        path);
}

void validate_dns_record_addresses(const struct schema_dns_record_addresses *d,
                                   const char *path,
                                   struct field_errors *fe)
{
        struct json_path p;
        struct cidr c;

        (void)rule_cidr(fe, at2(&p, path, "dnsRecordAddresses", "cidr"), d->cidr, &c);
        rule_interface(fe, at2(&p, path, "dnsRecordAddresses", "interface"), d->interface);
}

/* ---- immutability (MaasMachine) ---- */

static bool str_same(const char *a, const char *b)
{
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool static_ip_same(const struct schema_static_ip *a, const struct schema_static_ip *b)
{
        if (!a || !b)
                return a == b;
        if (!str_same(a->ip, b->ip) || !str_same(a->cidr, b->cidr) ||
            !str_same(a->gateway, b->gateway) || !str_same(a->interface, b->interface) ||
            a->nameservers.n != b->nameservers.n)
                return false;
        for (size_t i = 0; i < a->nameservers.n; i++)
                if (strcmp(a->nameservers.items[i], b->nameservers.items[i]) != 0)
                        return false;
        return true;
}

static bool pools_same(const struct schema_pool_refs *a, const struct schema_pool_refs *b)
{
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (!str_same(a->items[i].api_group, b->items[i].api_group) ||
                    !str_same(a->items[i].kind, b->items[i].kind) ||
                    !str_same(a->items[i].name, b->items[i].name))
                        return false;
        return true;
}

void machine_addresses_update(const struct maas_machine_spec *old,
                              const struct maas_machine_spec *cur,
                              struct field_errors *fe)
{
        if (!static_ip_same(old->static_ip, cur->static_ip))
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, "spec.staticIP", NULL,
                                 "field is immutable; the address is applied when the machine "
                                 "is allocated (delete the MaasMachine to change it)");
        if (!pools_same(&old->addresses_from_pools, &cur->addresses_from_pools))
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, "spec.addressesFromPools", NULL,
                                 "field is immutable; the address is claimed when the machine "
                                 "is created (delete the MaasMachine to change it)");
}

/* ---- MAAS checks ---- */

/* "a, b, c" of the subnets MAAS has (at most SUBNETS_LISTED, then ", ..."), or "none". */
static char *subnet_list(const struct maas_inventory_snapshot *s)
{
        char *out = xstrdup(s->n_subnets ? "" : "none");
        char *next;

        for (size_t i = 0; i < s->n_subnets && i < SUBNETS_LISTED; i++) {
                next = xasprintf("%s%s%s", out, i ? ", " : "", s->subnets[i].cidr);
                free(out);
                out = next;
        }
        if (s->n_subnets > SUBNETS_LISTED) {
                next = xasprintf("%s, ...", out);
                free(out);
                out = next;
        }
        return out;
}

bool maas_check_static_ip(const struct maas_machine_spec *sp, struct maas_check *c)
{
        const struct schema_static_ip *st = sp->static_ip;
        const struct maas_inv_machine *holder;
        struct json_path p;
        char *known;
        long i;

        if (!st || !st->cidr || !c->s->has_subnets)
                return true;
        i = maas_inv_find_subnet(c->s, st->cidr);
        if (i < 0) {
                known = subnet_list(c->s);
                field_invalid_str(c->fe, at2(&p, c->path, "staticIP", "cidr"), st->cidr,
                                  "no such subnet in MAAS (known: %s)", known);
                free(known);
                return false;
        }
        /* the MAAS step finds the subnet by its text: the same network spelt otherwise */
        if (strcmp(c->s->subnets[i].cidr, st->cidr) != 0)
                field_invalid_str(c->fe, at2(&p, c->path, "staticIP", "cidr"), st->cidr,
                                  "MAAS writes this subnet %s: write it the same way",
                                  c->s->subnets[i].cidr);
        holder = st->ip ? maas_inv_ip_holder(c->s, st->ip) : NULL;
        if (holder && c->warn && (!sp->system_id || strcmp(holder->system_id, sp->system_id) != 0))
                admission_response_warn(c->warn,
                                        "%s.staticIP.ip: %s is already in use by MAAS machine %s; "
                                        "the machine will not deploy with it until that machine "
                                        "releases it",
                                        c->path, st->ip, holder->system_id);
        return true;
}

bool maas_static_ip_same(const struct maas_machine_spec *a, const struct maas_machine_spec *b)
{
        return static_ip_same(a->static_ip, b->static_ip);
}
