/*
 * maas-sim ipaddresses: user-reserved addresses and dynamic ranges, as a MAAS region keeps
 * them (src/maasserver/api/ip_addresses.py and api/ipranges.py are the model):
 *   POST ipaddresses/?op=reserve  ip (or its deprecated alias ip_address) or subnet (CIDR,
 *       name or id), hostname (the address joins the DNS resource of that name, in the
 *       default domain or the one after its first dot, made when absent; an unknown domain
 *       404), mac (not modelled: 400). Outside every subnet 400 "No known
 *       subnet for IP address: X."; an unknown subnet 400 "Unable to identify subnet: S.";
 *       neither 400 "Must supply either the 'subnet' or the 'ip' parameter."; inside a
 *       dynamic range 403; held by a machine's link or another reservation 404 "The IP
 *       address X is already in use."; a full subnet 503. → 200 the address.
 *   POST ipaddresses/?op=release  ip: the caller's reservation → 204 (DNS resources it
 *       leaves without an address are deleted); otherwise 400 "IP
 *       address X does not exist, is not the correct type of address, or does not belong to
 *       the requesting user.\n..."
 *   GET ipaddresses/  ip (one address, else 400 "Parameter 'ip' must contain an IP
 *       address."), all=true (admin only, else 403): the caller's reservations, or everyone's.
 *   GET ipranges/  the subnets' dynamic ranges.
 * A reservation is an address in use for machines: link_subnet STATIC refuses it, AUTO
 * (deploy) and STATIC without an address skip it (network.c). Lock held by the dispatcher.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sim.h"
#include "xalloc.h"

#define RESERVED_MAX 4096 /* reservations in the region (a test's bound, not MAAS's) */

int sim_subnet_dynamic_json(struct sim_subnet *sn, const cJSON *o, char **ret_err)
{
        const char *start = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "start"));
        const char *end = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "end"));
        uint32_t lo = 0, hi = 0, mask = sn->prefix ? 0xffffffffu << (32 - sn->prefix) : 0;

        if (!o)
                return 0;
        if (!sim_parse_v4(start, &lo) || !sim_parse_v4(end, &hi) || lo > hi ||
            (lo & mask) != sn->net || (hi & mask) != sn->net) {
                *ret_err = xasprintf("subnet %s: dynamic_range needs start and end inside it",
                                     sn->cidr);
                return CM_EINVAL;
        }
        sn->has_dynamic = true;
        sn->dynamic_lo = lo;
        sn->dynamic_hi = hi;
        return 0;
}

static ssize_t find_reservation(const struct sim *s, uint32_t a)
{
        uint32_t b;

        for (size_t i = 0; i < s->n_reservations; i++)
                if (sim_parse_v4(s->reservations[i].ip, &b) && a == b)
                        return (ssize_t)i;
        return -1;
}

bool sim_ip_reserved(const struct sim *s, uint32_t a)
{
        return find_reservation(s, a) >= 0;
}

bool sim_ip_in_dynamic(const struct sim *s, uint32_t a)
{
        for (size_t i = 0; i < s->n_subnets; i++)
                if (s->subnets[i].has_dynamic && a >= s->subnets[i].dynamic_lo &&
                    a <= s->subnets[i].dynamic_hi)
                        return true;
        return false;
}

static void reservation_release(struct sim_reservation *r)
{
        free(r->ip);
        free(r->owner);
        free(r->hostname);
}

void sim_reservations_release(struct sim *s)
{
        for (size_t i = 0; i < s->n_reservations; i++)
                reservation_release(&s->reservations[i]);
        free(s->reservations);
        s->reservations = NULL;
        s->n_reservations = 0;
}

static cJSON *subnet_ref_json(const struct sim *s, ssize_t i)
{
        cJSON *o;

        if (i < 0)
                return cJSON_CreateNull();
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", s->subnets[i].id);
        cJSON_AddStringToObject(o, "name", s->subnets[i].name);
        cJSON_AddStringToObject(o, "cidr", s->subnets[i].cidr);
        return o;
}

static cJSON *reservation_json(const struct sim *s, const struct sim_reservation *r)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *owner = cJSON_CreateObject();

        cJSON_AddNumberToObject(o, "alloc_type", 4);
        cJSON_AddStringToObject(o, "alloc_type_name", "User reserved");
        cJSON_AddStringToObject(o, "created", "2026-01-01T00:00:00");
        cJSON_AddStringToObject(o, "ip", r->ip);
        cJSON_AddStringToObject(owner, "username", r->owner);
        cJSON_AddItemToObject(o, "owner", owner);
        cJSON_AddArrayToObject(o, "interface_set");
        cJSON_AddItemToObject(o, "subnet", subnet_ref_json(s, r->subnet));
        cJSON_AddStringToObject(o, "resource_uri", SIM_API_PREFIX "ipaddresses/");
        return o;
}

static bool is_admin(const struct sim_req *rq)
{
        return rq->user && strcmp(rq->user, "admin") == 0;
}

/* The subnet a reserve names: its CIDR, name or id (get_object_by_specifiers_or_raise). */
static ssize_t subnet_by_spec(const struct sim *s, const char *v)
{
        char *end = NULL;
        long id = strtol(v, &end, 10);

        for (size_t i = 0; i < s->n_subnets; i++)
                if (strcmp(s->subnets[i].cidr, v) == 0 || strcmp(s->subnets[i].name, v) == 0 ||
                    (*v && !*end && id == s->subnets[i].id))
                        return (ssize_t)i;
        return -1;
}

/* The address to reserve into *ret_ip and its subnet; false with rp filled when refused. */
static bool pick(struct sim *s,
                 const char *ip,
                 const char *subnet,
                 char **ret_ip,
                 ssize_t *ret_subnet,
                 struct sim_resp *rp)
{
        uint32_t a = 0;
        ssize_t sn;

        if (ip) {
                if (!sim_parse_v4(ip, &a)) {
                        sim_reply_field_error(rp, "ip_address",
                                              "Enter a valid IPv4 or IPv6 address.");
                        return false;
                }
                sn = sim_subnet_of(s, a);
                if (sn < 0) {
                        sim_reply_text(rp, 400, "No known subnet for IP address: %s.", ip);
                        return false;
                }
                if (sim_ip_in_dynamic(s, a)) {
                        sim_reply_text(rp, 403,
                                       "IP address %s belongs to an existing dynamic range. To "
                                       "reserve this IP address, a MAC address is required. "
                                       "(Create a device instead.)",
                                       ip);
                        return false;
                }
                if (sim_ip_machine(s, a) || sim_ip_reserved(s, a)) {
                        sim_reply_text(rp, 404, "The IP address %s is already in use.", ip);
                        return false;
                }
                *ret_ip = sim_format_v4(a);
        } else if (subnet) {
                sn = subnet_by_spec(s, subnet);
                if (sn < 0) {
                        sim_reply_text(rp, 400, "Unable to identify subnet: %s.", subnet);
                        return false;
                }
                *ret_ip = sim_free_address(s, (size_t)sn);
                if (!*ret_ip) {
                        sim_reply_text(rp, 503, "No more IPs available in subnet: %s.",
                                       s->subnets[sn].cidr);
                        return false;
                }
        } else {
                sim_reply_text(rp, 400, "Must supply either the 'subnet' or the 'ip' parameter.");
                return false;
        }
        *ret_subnet = sn;
        return true;
}

static void reserve(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        const char *ip = sim_params_get(&rq->form, "ip");
        const char *subnet = sim_params_get(&rq->form, "subnet");
        const char *hostname = sim_params_get(&rq->form, "hostname");
        struct sim_reservation r = { 0 };

        if (!ip)
                ip = sim_params_get(&rq->form, "ip_address");
        if (sim_params_get(&rq->form, "mac")) {
                sim_reply_field_error(rp, "mac", "maas-sim does not model reservations for a MAC.");
                return;
        }
        if (s->n_reservations >= RESERVED_MAX) {
                sim_reply_text(rp, 503, "maas-sim holds %d reservations at most.", RESERVED_MAX);
                return;
        }
        if (hostname && *hostname && strchr(hostname, '.') &&
            sim_find_domain(s, strchr(hostname, '.') + 1) < 0) {
                sim_reply_text(rp, 404, "No Domain matches the given query.");
                return;
        }
        if (!pick(s, ip && *ip ? ip : NULL, subnet && *subnet ? subnet : NULL, &r.ip, &r.subnet,
                  rp))
                return;
        if (hostname && *hostname)
                (void)sim_dns_link_reserved(s, hostname, r.ip); /* its domain checked above */
        r.id = ++s->next_reservation_id;
        r.owner = xstrdup(rq->user ? rq->user : "admin");
        r.hostname = hostname && *hostname ? xstrdup(hostname) : NULL;
        s->reservations =
                xrealloc(s->reservations, (s->n_reservations + 1) * sizeof(*s->reservations));
        s->reservations[s->n_reservations++] = r;
        /* deploys must now check every address they claim (network.c's fast path assumes
         * the inventory's own addresses are free) */
        s->static_linked = true;
        sim_reply_json(rp, reservation_json(s, &r));
}

static void release(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        const char *ip = sim_params_get(&rq->form, "ip");
        uint32_t a = 0;
        ssize_t i;

        if (!ip || !*ip) {
                sim_reply_text(rp, 400, "No provided ip!");
                return;
        }
        if (!sim_parse_v4(ip, &a)) {
                sim_reply_field_error(rp, "ip", "Enter a valid IPv4 or IPv6 address.");
                return;
        }
        i = find_reservation(s, a);
        if (i < 0 || strcmp(s->reservations[i].owner, rq->user ? rq->user : "admin") != 0) {
                sim_reply_text(rp, 400,
                               "IP address %s does not exist, is not the correct type of "
                               "address, or does not belong to the requesting user.\n"
                               "If you are sure you want to release this address, use "
                               "force=true as a MAAS administrator.",
                               ip);
                return;
        }
        sim_dns_unlink_released(s, s->reservations[i].ip);
        reservation_release(&s->reservations[i]);
        s->reservations[i] = s->reservations[--s->n_reservations];
        rp->status = 204;
}

static void read_all(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        const char *ip = sim_params_get(&rq->query, "ip");
        const char *all = sim_params_get(&rq->query, "all");
        const char *me = rq->user ? rq->user : "admin";
        bool every = false;
        uint32_t a = 0, b;
        cJSON *arr;

        if (all && sim_parse_bool(all, &every) < 0) {
                sim_reply_field_error(rp, "all", "'%s' is not a valid boolean.", all);
                return;
        }
        if (ip && !sim_parse_v4(ip, &a)) {
                sim_reply_text(rp, 400, "Parameter 'ip' must contain an IP address.");
                return;
        }
        if (every && !is_admin(rq)) {
                sim_reply_text(rp, 403, "Listing all IP addresses requires admin privileges.");
                return;
        }
        arr = cJSON_CreateArray();
        for (size_t i = 0; i < s->n_reservations; i++) {
                const struct sim_reservation *r = &s->reservations[i];

                if (!every && strcmp(r->owner, me) != 0)
                        continue;
                if (ip && !(sim_parse_v4(r->ip, &b) && a == b))
                        continue;
                cJSON_AddItemToArray(arr, reservation_json(s, r));
        }
        sim_reply_json(rp, arr);
}

static void ipranges_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        cJSON *arr = cJSON_CreateArray();
        int id = 0;

        (void)rq;
        for (size_t i = 0; i < s->n_subnets; i++) {
                const struct sim_subnet *sn = &s->subnets[i];
                cJSON *o;
                char *lo, *hi;

                if (!sn->has_dynamic)
                        continue;
                o = cJSON_CreateObject();
                lo = sim_format_v4(sn->dynamic_lo);
                hi = sim_format_v4(sn->dynamic_hi);
                cJSON_AddNumberToObject(o, "id", ++id);
                cJSON_AddStringToObject(o, "type", "dynamic");
                cJSON_AddStringToObject(o, "start_ip", lo);
                cJSON_AddStringToObject(o, "end_ip", hi);
                cJSON_AddStringToObject(o, "comment", "");
                cJSON_AddItemToObject(o, "subnet", subnet_ref_json(s, (ssize_t)i));
                cJSON_AddItemToArray(arr, o);
                free(lo);
                free(hi);
        }
        sim_reply_json(rp, arr);
}

const struct sim_op sim_ops_ipaddresses[] = {
        { "GET", NULL, read_all },
        { "POST", "reserve", reserve },
        { "POST", "release", release },
        { NULL, NULL, NULL },
};

const struct sim_op sim_ops_ipranges[] = {
        { "GET", NULL, ipranges_list },
        { NULL, NULL, NULL },
};
