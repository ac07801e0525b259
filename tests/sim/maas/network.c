/*
 * maas-sim network: subnets (IPv4, with gateway and DNS servers), interface links and the
 * addresses they hold, as a MAAS region keeps them (StaticIPAddress rows):
 *   - every interface with a subnet starts with an AUTO link, whose address is claimed when
 *     deploy starts (the interface's own address when free, else the first free one) and
 *     given back when release ends; STATIC links keep their address across release, as in
 *     MAAS (whoever linked it must unlink it);
 *   - an address is held by at most one link in the whole region: a STATIC link asking for
 *     one held anywhere is refused.
 * Endpoints (src/maasserver/api/interfaces.py and forms/interface_link.py are the model):
 *   GET subnets/, GET subnets/<id|cidr|name>/, GET nodes/<sid>/interfaces/,
 *   GET nodes/<sid>/interfaces/<id|name>/, POST nodes/<sid>/interfaces/<id>/ with
 *   op=link_subnet (mode, subnet, ip_address, default_gateway, force), op=unlink_subnet (id)
 *   and op=set_default_gateway (link_id). Link ops: admin only (403, empty body, as MAAS's
 *   PermissionDenied), the machine New, Ready, Failed testing, Allocated or Broken (else 409),
 *   form errors as a 400 field map, an address in use 404 "IP address is already in use."
 *   (MAAS's StaticIPAddressUnavailable is a 404). Lock held by the dispatcher throughout.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

#define MSG_IN_USE "IP address is already in use."

static const char *const mode_names[] = { "auto", "dhcp", "static", "link_up" };

/* --- addresses ------------------------------------------------------------------------------ */

static bool parse_v4(const char *s, uint32_t *ret)
{
        struct in_addr a = { 0 };

        if (!s || inet_pton(AF_INET, s, &a) != 1)
                return false;
        *ret = ntohl(a.s_addr);
        return true;
}

static char *format_v4(uint32_t a)
{
        struct in_addr in = { .s_addr = htonl(a) };
        char buf[INET_ADDRSTRLEN];

        return xstrdup(inet_ntop(AF_INET, &in, buf, sizeof(buf)));
}

static uint32_t prefix_mask(unsigned prefix)
{
        return prefix == 0 ? 0 : 0xffffffffu << (32 - prefix);
}

/* "a.b.c.d/n" with no host bits set. */
static bool parse_cidr(const char *cidr, uint32_t *ret_net, unsigned *ret_prefix)
{
        const char *slash = cidr ? strchr(cidr, '/') : NULL;
        char host[INET_ADDRSTRLEN];
        char *end = NULL;
        unsigned long n;
        uint32_t a = 0;

        if (!slash || (size_t)(slash - cidr) >= sizeof(host) || !slash[1])
                return false;
        memcpy(host, cidr, (size_t)(slash - cidr));
        host[slash - cidr] = '\0';
        n = strtoul(slash + 1, &end, 10);
        if (*end || n > 32 || !parse_v4(host, &a) || (a & ~prefix_mask((unsigned)n)))
                return false;
        *ret_net = a;
        *ret_prefix = (unsigned)n;
        return true;
}

static bool in_subnet(const struct sim_subnet *sn, uint32_t a)
{
        return (a & prefix_mask(sn->prefix)) == sn->net;
}

/* MAAS's str(subnet): "name:cidr(vid=N)". */
static char *subnet_str(const struct sim_subnet *sn)
{
        return xasprintf("%s:%s(vid=%d)", sn->name, sn->cidr, sn->vid);
}

/* The link holding address a anywhere in the region, or NULL. */
static const struct sim_link *holder(const struct sim *s, uint32_t a)
{
        for (size_t i = 0; i < s->n_machines; i++) {
                const struct sim_machine *m = &s->machines[i];

                for (size_t j = 0; j < m->n_ifaces; j++)
                        for (size_t k = 0; k < m->ifaces[j].n_links; k++) {
                                const struct sim_link *l = &m->ifaces[j].links[k];
                                uint32_t b;

                                if (l->ip && parse_v4(l->ip, &b) && b == a)
                                        return l;
                        }
        }
        return NULL;
}

/* Held by a link, reserved by a user, or inside a dynamic range: not MAAS's to assign. */
static bool taken(const struct sim *s, uint32_t a)
{
        return holder(s, a) || sim_ip_reserved(s, a) || sim_ip_in_dynamic(s, a);
}

/* The first address of the subnet nothing holds (not its network, broadcast or gateway
 * address, no user's reservation, not in its dynamic range); prefer first when it is one.
 * NULL when the subnet is full. */
static char *free_address(const struct sim *s, const struct sim_subnet *sn, const char *prefer)
{
        uint32_t a, gw = 0, last = sn->net | ~prefix_mask(sn->prefix);
        bool has_gw = parse_v4(sn->gateway_ip, &gw);

        if (parse_v4(prefer, &a) && in_subnet(sn, a) && !taken(s, a) && !(has_gw && a == gw))
                return format_v4(a);
        for (a = sn->net + 1; sn->prefix < 31 && a < last; a++)
                if (!(has_gw && a == gw) && !taken(s, a))
                        return format_v4(a);
        return NULL;
}

bool sim_parse_v4(const char *s, uint32_t *ret)
{
        return parse_v4(s, ret);
}

char *sim_format_v4(uint32_t a)
{
        return format_v4(a);
}

ssize_t sim_subnet_of(const struct sim *s, uint32_t a)
{
        for (size_t i = 0; i < s->n_subnets; i++)
                if (in_subnet(&s->subnets[i], a))
                        return (ssize_t)i;
        return -1;
}

const struct sim_machine *sim_ip_machine(const struct sim *s, uint32_t a)
{
        const struct sim_link *l = holder(s, a);

        for (size_t i = 0; l && i < s->n_machines; i++)
                for (size_t j = 0; j < s->machines[i].n_ifaces; j++)
                        for (size_t k = 0; k < s->machines[i].ifaces[j].n_links; k++)
                                if (&s->machines[i].ifaces[j].links[k] == l)
                                        return &s->machines[i];
        return NULL;
}

char *sim_free_address(const struct sim *s, size_t i)
{
        return free_address(s, &s->subnets[i], NULL);
}

/* --- subnets -------------------------------------------------------------------------------- */

static ssize_t find_subnet_cidr(const struct sim *s, const char *cidr)
{
        for (size_t i = 0; i < s->n_subnets; i++)
                if (strcmp(s->subnets[i].cidr, cidr) == 0)
                        return (ssize_t)i;
        return -1;
}

static ssize_t add_subnet(
        struct sim *s, const char *cidr, const char *name, const char *gw, int vid)
{
        struct sim_subnet sn = { .id = (int)s->n_subnets + 1, .vid = vid };

        if (!parse_cidr(cidr, &sn.net, &sn.prefix))
                return -1;
        sn.cidr = xstrdup(cidr);
        sn.name = xstrdup(name && *name ? name : cidr);
        sn.gateway_ip = gw && *gw ? xstrdup(gw) : NULL;
        s->subnets = xrealloc(s->subnets, (s->n_subnets + 1) * sizeof(*s->subnets));
        s->subnets[s->n_subnets] = sn;
        return (ssize_t)s->n_subnets++;
}

int sim_add_subnet_json(struct sim *s, const cJSON *o, char **ret_err)
{
        const cJSON *cidr = cJSON_GetObjectItemCaseSensitive(o, "cidr");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *gw = cJSON_GetObjectItemCaseSensitive(o, "gateway_ip");
        const cJSON *vid = cJSON_GetObjectItemCaseSensitive(o, "vid");
        const cJSON *e;
        uint32_t a = 0;
        ssize_t i;

        if (!cJSON_IsString(cidr) || find_subnet_cidr(s, cidr->valuestring) >= 0) {
                *ret_err = xstrdup("subnet: a new cidr is required");
                return CM_EINVAL;
        }
        if (cJSON_IsString(gw) && !parse_v4(gw->valuestring, &a)) {
                *ret_err = xasprintf("subnet %s: bad gateway_ip", cidr->valuestring);
                return CM_EINVAL;
        }
        i = add_subnet(s, cidr->valuestring, cJSON_IsString(name) ? name->valuestring : NULL,
                       cJSON_IsString(gw) ? gw->valuestring : NULL,
                       cJSON_IsNumber(vid) ? vid->valueint : 0);
        if (i < 0) {
                *ret_err =
                        xasprintf("subnet %s: not an IPv4 network (a.b.c.d/n)", cidr->valuestring);
                return CM_EINVAL;
        }
        if (cJSON_IsString(gw) && !in_subnet(&s->subnets[i], a)) {
                *ret_err = xasprintf("subnet %s: gateway_ip outside it", cidr->valuestring);
                return CM_EINVAL; /* kept: a later fix of the file adds it again */
        }
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(o, "dns_servers"))
                if (cJSON_IsString(e))
                        sim_strv_add(&s->subnets[i].dns_servers, e->valuestring);
        return sim_subnet_dynamic_json(
                &s->subnets[i], cJSON_GetObjectItemCaseSensitive(o, "dynamic_range"), ret_err);
}

ssize_t sim_subnet_for_cidr(struct sim *s, const char *cidr)
{
        ssize_t i = find_subnet_cidr(s, cidr);

        return i >= 0 ? i : add_subnet(s, cidr, NULL, NULL, 0);
}

void sim_subnets_release(struct sim *s)
{
        for (size_t i = 0; i < s->n_subnets; i++) {
                free(s->subnets[i].name);
                free(s->subnets[i].cidr);
                free(s->subnets[i].gateway_ip);
                sim_strv_release(&s->subnets[i].dns_servers);
        }
        free(s->subnets);
        s->subnets = NULL;
        s->n_subnets = 0;
}

/* --- links ---------------------------------------------------------------------------------- */

static struct sim_link *add_link(
        struct sim *s, struct sim_iface *f, enum sim_link_mode mode, ssize_t subnet, char *ip)
{
        s->static_linked = s->static_linked || mode == LINK_STATIC;
        f->links = xrealloc(f->links, (f->n_links + 1) * sizeof(*f->links));
        f->links[f->n_links] = (struct sim_link){
                .id = ++s->next_link_id, .mode = mode, .subnet = subnet, .ip = ip
        };
        return &f->links[f->n_links++];
}

static void remove_link_at(struct sim_iface *f, size_t k)
{
        free(f->links[k].ip);
        memmove(&f->links[k], &f->links[k + 1], (f->n_links - k - 1) * sizeof(*f->links));
        f->n_links--;
}

static void remove_mode(struct sim_iface *f, enum sim_link_mode mode)
{
        for (size_t k = f->n_links; k-- > 0;)
                if (f->links[k].mode == mode)
                        remove_link_at(f, k);
}

void sim_iface_init_links(struct sim *s, struct sim_iface *f)
{
        ssize_t sn = f->cidr ? sim_subnet_for_cidr(s, f->cidr) : -1;

        f->vid = sn >= 0 ? s->subnets[sn].vid : -1;
        if (sn >= 0)
                add_link(s, f, LINK_AUTO, sn, NULL);
}

void sim_iface_release_links(struct sim_iface *f)
{
        for (size_t k = 0; k < f->n_links; k++)
                free(f->links[k].ip);
        free(f->links);
        f->links = NULL;
        f->n_links = 0;
}

void sim_machine_reset_links(struct sim *s, struct sim_machine *m)
{
        m->gateway_link_v4 = 0;
        for (size_t j = 0; j < m->n_ifaces; j++) {
                sim_iface_release_links(&m->ifaces[j]);
                sim_iface_init_links(s, &m->ifaces[j]);
        }
}

void sim_machine_claim_auto(struct sim *s, struct sim_machine *m)
{
        for (size_t j = 0; j < m->n_ifaces; j++) {
                struct sim_iface *f = &m->ifaces[j];

                for (size_t k = 0; k < f->n_links; k++) {
                        struct sim_link *l = &f->links[k];

                        if (l->mode != LINK_AUTO || l->subnet < 0 || l->ip)
                                continue;
                        /* without STATIC links the inventory's own addresses cannot clash:
                         * no scan of the region per deploy (10 000-machine fleets) */
                        if (!s->static_linked && f->ip && f->cidr &&
                            find_subnet_cidr(s, f->cidr) == l->subnet)
                                l->ip = xstrdup(f->ip);
                        else
                                l->ip = free_address(s, &s->subnets[l->subnet], f->ip);
                }
        }
}

void sim_machine_release_auto(struct sim_machine *m)
{
        for (size_t j = 0; j < m->n_ifaces; j++)
                for (size_t k = 0; k < m->ifaces[j].n_links; k++) {
                        struct sim_link *l = &m->ifaces[j].links[k];

                        if (l->mode == LINK_AUTO) {
                                free(l->ip);
                                l->ip = NULL;
                        }
                }
}

/* --- JSON ----------------------------------------------------------------------------------- */

static cJSON *vlan_json(int vid)
{
        cJSON *v = cJSON_CreateObject();
        char *name = vid == 0 ? xstrdup("untagged") : xasprintf("vlan-%d", vid);
        char *uri = xasprintf(SIM_API_PREFIX "vlans/%d/", 5001 + vid);

        cJSON_AddNumberToObject(v, "id", 5001 + vid);
        cJSON_AddStringToObject(v, "name", name);
        cJSON_AddStringToObject(v, "fabric", "fabric-0");
        cJSON_AddNumberToObject(v, "fabric_id", 0);
        cJSON_AddNumberToObject(v, "vid", vid);
        cJSON_AddNumberToObject(v, "mtu", 1500);
        cJSON_AddBoolToObject(v, "dhcp_on", true);
        cJSON_AddNullToObject(v, "primary_rack");
        cJSON_AddNullToObject(v, "secondary_rack");
        cJSON_AddStringToObject(v, "space", "undefined");
        cJSON_AddStringToObject(v, "resource_uri", uri);
        free(name);
        free(uri);
        return v;
}

static cJSON *subnet_json(const struct sim *s, size_t i)
{
        const struct sim_subnet *sn = &s->subnets[i];
        cJSON *o = cJSON_CreateObject();
        cJSON *dns = cJSON_AddArrayToObject(o, "dns_servers");
        char *uri = xasprintf(SIM_API_PREFIX "subnets/%d/", sn->id);

        cJSON_AddNumberToObject(o, "id", sn->id);
        cJSON_AddStringToObject(o, "name", sn->name);
        cJSON_AddStringToObject(o, "description", "");
        cJSON_AddStringToObject(o, "cidr", sn->cidr);
        if (sn->gateway_ip)
                cJSON_AddStringToObject(o, "gateway_ip", sn->gateway_ip);
        else
                cJSON_AddNullToObject(o, "gateway_ip");
        for (size_t k = 0; k < sn->dns_servers.n; k++)
                cJSON_AddItemToArray(dns, cJSON_CreateString(sn->dns_servers.v[k]));
        cJSON_AddNumberToObject(o, "rdns_mode", 2);
        cJSON_AddBoolToObject(o, "allow_dns", true);
        cJSON_AddBoolToObject(o, "allow_proxy", true);
        cJSON_AddBoolToObject(o, "active_discovery", false);
        cJSON_AddBoolToObject(o, "managed", true);
        cJSON_AddStringToObject(o, "space", "undefined");
        cJSON_AddItemToObject(o, "vlan", vlan_json(sn->vid));
        cJSON_AddStringToObject(o, "resource_uri", uri);
        free(uri);
        return o;
}

cJSON *sim_iface_json(const struct sim *s, const struct sim_machine *m, const struct sim_iface *f)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *links = cJSON_CreateArray();
        char *uri = xasprintf(SIM_API_PREFIX "nodes/%s/interfaces/%d/", m->system_id, f->id);

        cJSON_AddNumberToObject(o, "id", f->id);
        cJSON_AddStringToObject(o, "name", f->name);
        cJSON_AddStringToObject(o, "type", "physical");
        cJSON_AddBoolToObject(o, "enabled", true);
        cJSON_AddArrayToObject(o, "tags");
        cJSON_AddStringToObject(o, "mac_address", f->mac);
        cJSON_AddNumberToObject(o, "effective_mtu", 1500);
        cJSON_AddArrayToObject(o, "parents");
        cJSON_AddArrayToObject(o, "children");
        cJSON_AddStringToObject(o, "system_id", m->system_id);
        if (f->vid >= 0)
                cJSON_AddItemToObject(o, "vlan", vlan_json(f->vid));
        else
                cJSON_AddNullToObject(o, "vlan");
        for (size_t k = 0; k < f->n_links; k++) {
                const struct sim_link *l = &f->links[k];
                cJSON *lo = cJSON_CreateObject();

                cJSON_AddNumberToObject(lo, "id", l->id);
                cJSON_AddStringToObject(lo, "mode", mode_names[l->mode]);
                if (l->ip)
                        cJSON_AddStringToObject(lo, "ip_address", l->ip);
                if (l->subnet >= 0)
                        cJSON_AddItemToObject(lo, "subnet", subnet_json(s, (size_t)l->subnet));
                cJSON_AddItemToArray(links, lo);
        }
        cJSON_AddItemToObject(o, "links", links);
        cJSON_AddStringToObject(o, "resource_uri", uri);
        free(uri);
        return o;
}

cJSON *sim_machine_ips_json(const struct sim_machine *m)
{
        cJSON *a = cJSON_CreateArray();

        for (size_t j = 0; j < m->n_ifaces; j++)
                for (size_t k = 0; k < m->ifaces[j].n_links; k++)
                        if (m->ifaces[j].links[k].ip)
                                cJSON_AddItemToArray(a,
                                                     cJSON_CreateString(m->ifaces[j].links[k].ip));
        return a;
}

static const struct sim_link *find_link(const struct sim_machine *m, int id)
{
        for (size_t j = 0; id && j < m->n_ifaces; j++)
                for (size_t k = 0; k < m->ifaces[j].n_links; k++)
                        if (m->ifaces[j].links[k].id == id)
                                return &m->ifaces[j].links[k];
        return NULL;
}

cJSON *sim_default_gateways_json(const struct sim *s, const struct sim_machine *m)
{
        const struct sim_link *l = find_link(m, m->gateway_link_v4);
        const struct sim_subnet *sn = l && l->subnet >= 0 ? &s->subnets[l->subnet] : NULL;
        cJSON *gw = cJSON_CreateObject();
        cJSON *v4 = cJSON_AddObjectToObject(gw, "ipv4");
        cJSON *v6 = cJSON_AddObjectToObject(gw, "ipv6");

        if (sn && sn->gateway_ip) {
                cJSON_AddStringToObject(v4, "gateway_ip", sn->gateway_ip);
                cJSON_AddNumberToObject(v4, "link_id", l->id);
        } else {
                cJSON_AddNullToObject(v4, "gateway_ip");
                cJSON_AddNullToObject(v4, "link_id");
        }
        cJSON_AddNullToObject(v6, "gateway_ip");
        cJSON_AddNullToObject(v6, "link_id");
        return gw;
}

/* --- handlers: subnets ---------------------------------------------------------------------- */

static bool is_number(const char *v)
{
        if (!v || !*v)
                return false;
        for (; *v; v++)
                if (*v < '0' || *v > '9')
                        return false;
        return true;
}

/* A subnet specifier as MAAS reads one: an id, "cidr:X", "name:X", or a bare CIDR or name;
 * only subnets on VLAN vid count (vid < 0: any). -1 when none matches. */
static ssize_t find_subnet_spec(const struct sim *s, const char *v, int vid)
{
        const char *cidr = strncmp(v, "cidr:", 5) == 0 ? v + 5 : v;
        const char *name = strncmp(v, "name:", 5) == 0 ? v + 5 : v;
        bool by_id = strncmp(v, "id:", 3) == 0 || is_number(v);
        long id = by_id ? strtol(v + (v[0] == 'i' ? 3 : 0), NULL, 10) : -1;

        for (size_t i = 0; i < s->n_subnets; i++) {
                const struct sim_subnet *sn = &s->subnets[i];

                if (vid >= 0 && sn->vid != vid)
                        continue;
                if (by_id ? sn->id == id
                          : strcmp(sn->cidr, cidr) == 0 || strcmp(sn->name, name) == 0)
                        return (ssize_t)i;
        }
        return -1;
}

static void subnets_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        cJSON *arr = cJSON_CreateArray();

        (void)rq;
        for (size_t i = 0; i < s->n_subnets; i++)
                cJSON_AddItemToArray(arr, subnet_json(s, i));
        sim_reply_json(rp, arr);
}

static void subnet_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        ssize_t i = find_subnet_spec(s, rq->arg, -1);

        if (i < 0)
                sim_reply_text(rp, 404, "No Subnet matches the given query.");
        else
                sim_reply_json(rp, subnet_json(s, (size_t)i));
}

/* --- handlers: interfaces ------------------------------------------------------------------- */

static struct sim_machine *node_of(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = sim_find_machine(s, rq->arg);

        if (!m) {
                sim_reply_text(rp, 404, "No Node matches the given query.");
                return NULL;
        }
        sim_machine_tick(s, m);
        return m;
}

static struct sim_iface *iface_of(struct sim_machine *m, const char *spec, struct sim_resp *rp)
{
        for (size_t j = 0; spec && j < m->n_ifaces; j++) {
                char id[16];

                snprintf(id, sizeof(id), "%d", m->ifaces[j].id);
                if (strcmp(id, spec) == 0 || strcmp(m->ifaces[j].name, spec) == 0)
                        return &m->ifaces[j];
        }
        sim_reply_text(rp, 404, "No Interface matches the given query.");
        return NULL;
}

static void interfaces_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = node_of(s, rq, rp);
        cJSON *arr;

        if (!m)
                return;
        arr = cJSON_CreateArray();
        for (size_t j = 0; j < m->n_ifaces; j++)
                cJSON_AddItemToArray(arr, sim_iface_json(s, m, &m->ifaces[j]));
        sim_reply_json(rp, arr);
}

static void interface_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = node_of(s, rq, rp);
        struct sim_iface *f = m ? iface_of(m, rq->arg2, rp) : NULL;

        if (f)
                sim_reply_json(rp, sim_iface_json(s, m, f));
}

/* The interface a link op names, once the user may change it and the machine's state
 * allows it (interfaces.py: 404, then 403, then 409). */
static struct sim_iface *editable(struct sim *s,
                                  const struct sim_req *rq,
                                  const char *operation,
                                  struct sim_machine **ret_m,
                                  struct sim_resp *rp)
{
        static const enum sim_status ok[] = { ST_NEW, ST_READY, 22 /* Failed testing */,
                                              ST_ALLOCATED, ST_BROKEN };
        struct sim_machine *m = node_of(s, rq, rp);
        struct sim_iface *f = m ? iface_of(m, rq->arg2, rp) : NULL;
        bool allowed = false;

        if (!f)
                return NULL;
        if (!rq->user || strcmp(rq->user, "admin") != 0) {
                /* only a machine's administrator may change its interfaces, not its owner */
                sim_reply_text(rp, 403, "%s", "");
                return NULL;
        }
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
                allowed = allowed || m->status == ok[i];
        if (!allowed) {
                sim_reply_text(rp, 409,
                               "Cannot %s interface because the machine is not New, Ready, "
                               "Allocated, or Broken.",
                               operation);
                return NULL;
        }
        *ret_m = m;
        return f;
}

static void field_error(cJSON *errs, const char *field, const char *fmt, ...) PRINTF_LIKE(3, 4);

static void field_error(cJSON *errs, const char *field, const char *fmt, ...)
{
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(errs, field);
        va_list ap;
        char *msg;

        if (!arr)
                arr = cJSON_AddArrayToObject(errs, field);
        va_start(ap, fmt);
        msg = xvasprintf(fmt, ap);
        va_end(ap);
        cJSON_AddItemToArray(arr, cJSON_CreateString(msg));
        free(msg);
}

/* 400 with the field map when errs has any; takes errs. */
static bool reply_errors(cJSON *errs, struct sim_resp *rp)
{
        if (!errs->child) {
                cJSON_Delete(errs);
                return false;
        }
        sim_reply_json(rp, errs);
        rp->status = 400;
        return true;
}

static bool truthy(const char *v)
{
        bool b = false;

        /* Django's BooleanField: "false", "0" and "" are false, anything else true */
        return v && (sim_parse_bool(v, &b) < 0 || b);
}

struct link_form {
        int mode; /* enum sim_link_mode, -1 = missing or bad */
        ssize_t subnet;
        const char *ip;
        bool gateway, force;
};

static void clean_fields(const struct sim *s,
                         const struct sim_iface *f,
                         const struct sim_params *p,
                         struct link_form *lf,
                         cJSON *errs)
{
        const char *mode = sim_params_get(p, "mode");
        const char *subnet = sim_params_get(p, "subnet");
        uint32_t a = 0;
        struct in6_addr a6;

        lf->mode = -1;
        for (size_t i = 0; mode && i < ARRAY_SIZE(mode_names); i++)
                if (strcasecmp(mode, mode_names[i]) == 0)
                        lf->mode = (int)i;
        if (!mode || !*mode)
                field_error(errs, "mode", "This field is required.");
        else if (lf->mode < 0)
                field_error(errs, "mode",
                            "'%s' is not a valid mode.  It should be one of: 'auto', 'dhcp', "
                            "'static', 'link_up'.",
                            mode);
        lf->subnet = -1;
        if (subnet && *subnet) {
                lf->subnet = find_subnet_spec(s, subnet, lf->force ? -1 : f->vid);
                if (lf->subnet < 0 && is_number(subnet))
                        field_error(errs, "subnet", "None found with id=%s.", subnet);
                else if (lf->subnet < 0)
                        field_error(errs, "subnet",
                                    "Select a valid choice. That choice is not one of the "
                                    "available choices.");
        }
        lf->ip = sim_params_get(p, "ip_address");
        if (lf->ip && !*lf->ip)
                lf->ip = NULL;
        if (lf->ip && !parse_v4(lf->ip, &a) && inet_pton(AF_INET6, lf->ip, &a6) != 1) {
                field_error(errs, "ip_address", "Enter a valid IPv4 or IPv6 address.");
                lf->ip = NULL;
        }
        lf->gateway = truthy(sim_params_get(p, "default_gateway"));
}

static bool has_active_links(const struct sim_iface *f)
{
        for (size_t k = 0; k < f->n_links; k++)
                if (f->links[k].mode != LINK_UP)
                        return true;
        return false;
}

static void clean_mode(const struct sim *s,
                       const struct sim_iface *f,
                       const struct link_form *lf,
                       bool subnet_bad,
                       cJSON *errs)
{
        const struct sim_subnet *sn = lf->subnet >= 0 ? &s->subnets[lf->subnet] : NULL;
        char *str = sn ? subnet_str(sn) : NULL;
        uint32_t a = 0;

        if ((lf->mode == LINK_AUTO || lf->mode == LINK_STATIC) && !sn && !subnet_bad)
                field_error(errs, "subnet", "This field is required.");
        if (lf->mode == LINK_STATIC && sn && lf->ip && (!parse_v4(lf->ip, &a) || !in_subnet(sn, a)))
                field_error(errs, "ip_address", "IP address is not in the given subnet '%s'.", str);
        for (size_t k = 0; lf->mode == LINK_DHCP && k < f->n_links; k++) {
                const struct sim_link *l = &f->links[k];
                char *had;

                if (l->mode != LINK_DHCP)
                        continue;
                if (l->subnet < 0) {
                        field_error(errs, "mode", "Interface is already set to DHCP.");
                        break;
                }
                had = subnet_str(&s->subnets[l->subnet]);
                field_error(errs, "mode", "Interface is already set to DHCP from '%s'.", had);
                free(had);
                break;
        }
        if (lf->mode == LINK_UP && has_active_links(f) && !lf->force)
                field_error(errs, "mode",
                            "Cannot configure interface to link up (with no IP address) while "
                            "other links are already configured. Specify force=True to override "
                            "this behavior and delete all links.");
        if (lf->gateway && lf->mode >= 0) {
                if (lf->mode != LINK_AUTO && lf->mode != LINK_STATIC)
                        field_error(errs, "default_gateway", "Cannot use in mode '%s'.",
                                    mode_names[lf->mode]);
                else if (!sn && !subnet_bad)
                        field_error(errs, "default_gateway",
                                    "Subnet is required when default_gateway is True.");
                else if (sn && !sn->gateway_ip)
                        field_error(errs, "default_gateway",
                                    "Cannot set as default gateway because subnet %s doesn't "
                                    "provide a gateway IP address.",
                                    str);
        }
        free(str);
}

/* Saves a valid link form (interface.py's link_subnet); 0, or fills rp. */
static int save_link(struct sim *s,
                     struct sim_machine *m,
                     struct sim_iface *f,
                     const struct link_form *lf,
                     struct sim_resp *rp)
{
        struct sim_link *l;
        char *ip = NULL;
        uint32_t a = 0;

        if (lf->mode == LINK_STATIC && lf->ip) {
                /* a user's reservation is an address in use (MAAS's StaticIPAddress row) */
                if (parse_v4(lf->ip, &a) && (holder(s, a) || sim_ip_reserved(s, a))) {
                        sim_reply_text(rp, 404, MSG_IN_USE);
                        return CM_EEXIST;
                }
                ip = format_v4(a);
        } else if (lf->mode == LINK_STATIC) {
                ip = free_address(s, &s->subnets[lf->subnet], NULL);
                if (!ip) {
                        sim_reply_text(rp, 503, "No more IPs available in subnet: %s.",
                                       s->subnets[lf->subnet].cidr);
                        return CM_EEXIST;
                }
        }
        if (lf->mode == LINK_UP || lf->force)
                sim_iface_release_links(f);
        if (lf->subnet >= 0 && (f->vid < 0 || lf->force))
                f->vid = s->subnets[lf->subnet].vid;
        /* every mode replaces the interface's DHCP and LINK_UP links (one family here) */
        remove_mode(f, LINK_UP);
        remove_mode(f, LINK_DHCP);
        l = add_link(s, f, (enum sim_link_mode)lf->mode, lf->subnet, ip);
        if (lf->gateway)
                m->gateway_link_v4 = l->id;
        return 0;
}

static void interface_link_subnet(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = NULL;
        struct sim_iface *f = editable(s, rq, "link subnet", &m, rp);
        struct link_form lf = { 0 };
        const char *subnet, *force;
        cJSON *errs;

        if (!f)
                return;
        force = sim_params_get(&rq->form, "force");
        if (force && sim_parse_bool(force, &lf.force) < 0) {
                sim_reply_field_error(rp, "force", "'%s' is not a valid boolean.", force);
                return;
        }
        subnet = sim_params_get(&rq->form, "subnet");
        errs = cJSON_CreateObject();
        clean_fields(s, f, &rq->form, &lf, errs);
        if (lf.mode >= 0)
                clean_mode(s, f, &lf, subnet && *subnet && lf.subnet < 0, errs);
        if (reply_errors(errs, rp) || save_link(s, m, f, &lf, rp) < 0)
                return;
        sim_reply_json(rp, sim_iface_json(s, m, f));
}

/* "'<v>' is not a valid <what>.  It should be one of: '1', '2'." (compose_invalid_choice_text) */
static void invalid_choice(cJSON *errs, const char *what, const char *v, const int *ids, size_t n)
{
        struct buf b;

        buf_init(&b, 16 * 1024);
        for (size_t i = 0; i < n; i++)
                sim_bprintf(&b, "%s'%d'", i ? ", " : "", ids[i]);
        field_error(errs, what, "'%s' is not a valid %s.  It should be one of: %s.", v, what,
                    b.data ? b.data : "");
        buf_release(&b);
}

static void interface_unlink_subnet(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = NULL;
        struct sim_iface *f = editable(s, rq, "unlink subnet", &m, rp);
        const char *id = sim_params_get(&rq->form, "id");
        int *ids;
        cJSON *errs;
        size_t k;

        if (!f)
                return;
        errs = cJSON_CreateObject();
        ids = xcalloc(f->n_links + 1, sizeof(*ids));
        for (k = 0; k < f->n_links; k++)
                ids[k] = f->links[k].id;
        for (k = 0; id && k < f->n_links; k++) {
                char buf[16];

                snprintf(buf, sizeof(buf), "%d", f->links[k].id);
                if (strcmp(buf, id) == 0)
                        break;
        }
        if (!id || !*id)
                field_error(errs, "id", "This field is required.");
        else if (k == f->n_links)
                invalid_choice(errs, "id", id, ids, f->n_links);
        free(ids);
        if (reply_errors(errs, rp))
                return;
        if (m->gateway_link_v4 == f->links[k].id)
                m->gateway_link_v4 = 0;
        remove_link_at(f, k);
        if (f->n_links == 0) /* ensure_link_up: an enabled interface keeps a LINK_UP */
                add_link(s, f, LINK_UP, -1, NULL);
        sim_reply_json(rp, sim_iface_json(s, m, f));
}

static bool gateway_link(const struct sim *s, const struct sim_link *l)
{
        return l->mode != LINK_UP && l->subnet >= 0 && s->subnets[l->subnet].gateway_ip;
}

/* Distinct gateway addresses among the interface's usable links. */
static size_t distinct_gateways(const struct sim *s, const struct sim_iface *f)
{
        size_t n = 0;

        for (size_t k = 0; k < f->n_links; k++) {
                const char *gw = gateway_link(s, &f->links[k])
                                         ? s->subnets[f->links[k].subnet].gateway_ip
                                         : NULL;
                bool seen = false;

                for (size_t j = 0; gw && j < k; j++)
                        seen = seen || (gateway_link(s, &f->links[j]) &&
                                        strcmp(s->subnets[f->links[j].subnet].gateway_ip, gw) == 0);
                n += gw && !seen;
        }
        return n;
}

static void interface_set_default_gateway(struct sim *s,
                                          const struct sim_req *rq,
                                          struct sim_resp *rp)
{
        struct sim_machine *m = NULL;
        struct sim_iface *f = editable(s, rq, "set default gateway", &m, rp);
        const char *want = sim_params_get(&rq->form, "link_id");
        const struct sim_link *first = NULL, *chosen = NULL;
        size_t n = 0;
        int *ids;
        cJSON *errs;

        if (!f)
                return;
        if (want && !*want)
                want = NULL;
        errs = cJSON_CreateObject();
        ids = xcalloc(f->n_links + 1, sizeof(*ids));
        for (size_t k = 0; k < f->n_links; k++) {
                const struct sim_link *l = &f->links[k];

                if (!gateway_link(s, l))
                        continue;
                ids[n++] = l->id;
                first = first ? first : l;
                if (want && is_number(want) && l->id == strtol(want, NULL, 10))
                        chosen = l;
        }
        if (n == 0)
                field_error(errs, "__all__", "This interface has no usable gateways.");
        else if (want && !chosen)
                invalid_choice(errs, "link_id", want, ids, n);
        else if (!want && distinct_gateways(s, f) > 1)
                field_error(errs, "link_id",
                            "This field is required; Interface has more than one usable IPv4 "
                            "gateway.");
        free(ids);
        if (reply_errors(errs, rp))
                return;
        m->gateway_link_v4 = (chosen ? chosen : first)->id;
        sim_reply_json(rp, sim_iface_json(s, m, f));
}

const struct sim_op sim_ops_subnets[] = {
        { "GET", NULL, subnets_list },
        { NULL, NULL, NULL },
};

const struct sim_op sim_ops_subnet[] = {
        { "GET", NULL, subnet_read },
        { NULL, NULL, NULL },
};

const struct sim_op sim_ops_interfaces[] = {
        { "GET", NULL, interfaces_list },
        { NULL, NULL, NULL },
};

const struct sim_op sim_ops_interface[] = {
        { "GET", NULL, interface_read },
        { "POST", "link_subnet", interface_link_subnet },
        { "POST", "unlink_subnet", interface_unlink_subnet },
        { "POST", "set_default_gateway", interface_set_default_gateway },
        { NULL, NULL, NULL },
};
