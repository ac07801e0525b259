/*
 * validate_endpoint: MaasCluster spec.endpoint (docs/endpoints.md): its value rules, the
 * type (and a VIP's address and subnet) immutable once the cluster has an endpoint, and the
 * VIP's checks against the MAAS inventory snapshot: inside a MAAS subnet, not its network,
 * broadcast or gateway address, not inside a dynamic (DHCP) range, not held by a machine or
 * by another user's reservation. Pure and reentrant.
 */
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "cidr.h"
#include "field_errors.h"
#include "json.h"
#include "maas_inventory.h"
#include "validate.h"
#include "xalloc.h"

#define SUBNETS_NAMED 8 /* subnets a denial lists, then ", ..." */

static const char *at(struct json_path *p, const char *path, const char *field)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, field);
        return json_path_str(p);
}

static bool is_type(const char *t)
{
        return strcmp(t, SCHEMA_ENDPOINT_DNS) == 0 || strcmp(t, SCHEMA_ENDPOINT_VIP) == 0 ||
               strcmp(t, SCHEMA_ENDPOINT_EXTERNAL) == 0;
}

static bool is_vip(const struct schema_endpoint *e)
{
        return e && e->type && strcmp(e->type, SCHEMA_ENDPOINT_VIP) == 0;
}

static const char *type_of(const struct schema_endpoint *e)
{
        return e && e->type && *e->type ? e->type : SCHEMA_ENDPOINT_DNS;
}

/* A VIP's address and subnet: an address, a network, the one inside the other. */
static void vip_rules(const struct schema_endpoint *e, const char *path, struct field_errors *fe)
{
        struct json_path p;
        struct ip_addr a;
        struct cidr n;
        bool has_a = false, has_n = false;

        if (!e->address && !e->subnet)
                field_errors_add(fe, FIELD_ERR_REQUIRED, at(&p, path, "endpoint.address"), NULL,
                                 "a VIP needs an address, or a subnet MAAS picks one from");
        if (e->address) {
                has_a = ip_addr_parse(e->address, &a) == 0;
                if (!has_a)
                        field_invalid_str(fe, at(&p, path, "endpoint.address"), e->address,
                                          "must be an IPv4 or IPv6 address");
        }
        if (e->subnet) {
                has_n = cidr_parse(e->subnet, &n) == 0 && cidr_is_network(&n);
                if (!has_n)
                        field_invalid_str(fe, at(&p, path, "endpoint.subnet"), e->subnet,
                                          "must be the CIDR of a MAAS subnet (e.g. 10.10.0.0/24)");
        }
        if (has_a && has_n && !cidr_contains(&n, &a))
                field_invalid_str(fe, at(&p, path, "endpoint.address"), e->address,
                                  "is not inside spec.endpoint.subnet %s", e->subnet);
}

void validate_endpoint_spec(const struct maas_cluster_spec *s,
                            const char *path,
                            struct field_errors *fe)
{
        const struct schema_endpoint *e = s->endpoint;
        struct json_path p;
        char *q;

        if (!e)
                return;
        if (e->type && !is_type(e->type)) {
                q = field_quote(e->type);
                field_errors_add(fe, FIELD_ERR_NOT_SUPPORTED, at(&p, path, "endpoint.type"), q,
                                 "supported values: \"DNS\", \"VIP\", \"External\"");
                free(q);
                return;
        }
        if (is_vip(e)) {
                vip_rules(e, path, fe);
                return;
        }
        if (e->address)
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, at(&p, path, "endpoint.address"), NULL,
                                 "only with type VIP");
        if (e->subnet)
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, at(&p, path, "endpoint.subnet"), NULL,
                                 "only with type VIP");
        if (e->has_dns_record && e->dns_record)
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, at(&p, path, "endpoint.dnsRecord"), NULL,
                                 "only with type VIP (the DNS type is a record)");
}

static bool str_eq(const char *a, const char *b)
{
        return strcmp(a ? a : "", b ? b : "") == 0;
}

void cluster_update(const cJSON *old_json,
                    const union webhook_obj *old,
                    const union webhook_obj *cur,
                    struct field_errors *fe)
{
        const struct schema_api_endpoint *ep = old->cluster.spec.control_plane_endpoint;
        const struct schema_endpoint *o = old->cluster.spec.endpoint,
                                     *c = cur->cluster.spec.endpoint;
        static const char why[] = "field is immutable once the cluster has an endpoint "
                                  "(spec.controlPlaneEndpoint.host is set)";

        (void)old_json;
        if (!ep || !ep->host || !*ep->host)
                return;
        if (strcmp(type_of(o), type_of(c)) != 0) {
                field_invalid_str(fe, "spec.endpoint.type", type_of(c), "%s", why);
                return;
        }
        if (!is_vip(o))
                return;
        if (!str_eq(o->address, c->address))
                field_invalid_str(fe, "spec.endpoint.address", c->address ? c->address : "", "%s",
                                  why);
        if (!str_eq(o->subnet, c->subnet))
                field_invalid_str(fe, "spec.endpoint.subnet", c->subnet ? c->subnet : "", "%s",
                                  why);
}

/* ---- MAAS checks ---- */

/* "a, b, c" of MAAS's subnets (SUBNETS_NAMED at most, then ", ..."), or "none". */
static char *subnets_named(const struct maas_inventory_snapshot *s)
{
        char *out = xstrdup(s->n_subnets ? "" : "none"), *next;

        for (size_t i = 0; i < s->n_subnets && i < SUBNETS_NAMED; i++) {
                next = xasprintf("%s%s%s", out, i ? ", " : "", s->subnets[i].cidr);
                free(out);
                out = next;
        }
        if (s->n_subnets > SUBNETS_NAMED) {
                next = xasprintf("%s, ...", out);
                free(out);
                out = next;
        }
        return out;
}

/* The subnet holding a, or -1. */
static long subnet_holding(const struct maas_inventory_snapshot *s,
                           const struct ip_addr *a,
                           struct cidr *ret)
{
        for (size_t i = 0; i < s->n_subnets; i++)
                if (cidr_parse(s->subnets[i].cidr, ret) == 0 && cidr_contains(ret, a))
                        return (long)i;
        return -1;
}

static int ip_cmp(const struct ip_addr *x, const struct ip_addr *y)
{
        return memcmp(x->b, y->b, x->family == y->family ? sizeof(x->b) : 0);
}

/* The dynamic range holding a, or NULL. */
static const struct maas_inv_range *dynamic_holding(const struct maas_inventory_snapshot *s,
                                                    const struct ip_addr *a)
{
        struct ip_addr lo, hi;

        for (size_t i = 0; i < s->n_ranges; i++) {
                const struct maas_inv_range *r = &s->ranges[i];

                if (strcmp(r->type, "dynamic") != 0 || ip_addr_parse(r->start_ip, &lo) != 0 ||
                    ip_addr_parse(r->end_ip, &hi) != 0 || lo.family != a->family ||
                    hi.family != a->family)
                        continue;
                if (ip_cmp(&lo, a) <= 0 && ip_cmp(a, &hi) <= 0)
                        return r;
        }
        return NULL;
}

/* The address against its subnet: network, broadcast, gateway, a dynamic range. */
static void address_in_subnet(const struct maas_inventory_snapshot *s,
                              long i,
                              const struct cidr *n,
                              const char *field,
                              const char *ip,
                              const struct ip_addr *a,
                              struct field_errors *fe)
{
        const struct maas_inv_subnet *sn = &s->subnets[i];
        const struct maas_inv_range *r = dynamic_holding(s, a);
        struct ip_addr gw;

        if (cidr_is_network_address(n, a))
                field_invalid_str(fe, field, ip, "is the network address of MAAS subnet %s",
                                  sn->cidr);
        else if (cidr_is_broadcast(n, a))
                field_invalid_str(fe, field, ip, "is the broadcast address of MAAS subnet %s",
                                  sn->cidr);
        else if (sn->gateway_ip && ip_addr_parse(sn->gateway_ip, &gw) == 0 && ip_addr_equal(&gw, a))
                field_invalid_str(fe, field, ip, "is the gateway of MAAS subnet %s", sn->cidr);
        else if (r)
                field_invalid_str(fe, field, ip,
                                  "is inside the dynamic (DHCP) range %s-%s of MAAS subnet %s: "
                                  "MAAS leases it to any host",
                                  r->start_ip, r->end_ip, sn->cidr);
}

/* Who holds the address: a machine, another user's reservation (denied), capmaas's own
 * user's (a warning: this cluster's before a move, or another cluster's, which the
 * controller refuses to share). */
static void address_holder(struct maas_check *c, const char *field, const char *ip)
{
        const struct maas_inv_machine *m = maas_inv_ip_holder(c->s, ip);
        const struct maas_inv_reserved *r = maas_inv_reservation(c->s, ip);

        if (m)
                field_invalid_str(c->fe, field, ip, "is in use by MAAS machine %s", m->system_id);
        else if (r && !r->mine)
                field_invalid_str(c->fe, field, ip, "is already reserved in MAAS by user %s",
                                  r->owner ? r->owner : "(unknown)");
        else if (r && c->warn)
                admission_response_warn(c->warn,
                                        "%s: %s is already reserved by capmaas's MAAS user: this "
                                        "cluster's before a move is adopted, another cluster's "
                                        "is refused by the controller",
                                        field, ip);
}

void maas_check_endpoint(const struct maas_cluster_spec *sp, struct maas_check *c)
{
        const struct schema_endpoint *e = sp->endpoint;
        struct json_path p;
        struct ip_addr a;
        struct cidr n;
        char *known;
        long i;

        if (!is_vip(e) || !c->s->has_subnets)
                return;
        if (!e->address) {
                if (e->subnet && maas_inv_find_subnet(c->s, e->subnet) < 0) {
                        known = subnets_named(c->s);
                        field_invalid_str(c->fe, at(&p, c->path, "endpoint.subnet"), e->subnet,
                                          "no such subnet in MAAS (its subnets: %s)", known);
                        free(known);
                        c->miss = true;
                }
                return;
        }
        if (ip_addr_parse(e->address, &a) != 0)
                return; /* the value rules said so */
        i = subnet_holding(c->s, &a, &n);
        if (i < 0) {
                known = subnets_named(c->s);
                field_invalid_str(c->fe, at(&p, c->path, "endpoint.address"), e->address,
                                  "is not inside any MAAS subnet (its subnets: %s)", known);
                free(known);
                c->miss = true;
                return;
        }
        address_in_subnet(c->s, i, &n, at(&p, c->path, "endpoint.address"), e->address, &a, c->fe);
        address_holder(c, at(&p, c->path, "endpoint.address"), e->address);
}

bool maas_endpoint_same(const struct maas_cluster_spec *a, const struct maas_cluster_spec *b)
{
        const struct schema_endpoint *x = a->endpoint, *y = b->endpoint;

        return strcmp(type_of(x), type_of(y)) == 0 &&
               str_eq(x ? x->address : NULL, y ? y->address : NULL) &&
               str_eq(x ? x->subnet : NULL, y ? y->subnet : NULL);
}
