/*
 * maascluster_addresses: the control-plane addresses of the endpoint record, by the
 * MaasCluster's spec.dnsRecordAddresses (maascluster_addresses.h).
 */
#include "maascluster_addresses.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"
#include "reconciler.h"
#include "xalloc.h"

bool endpoint_pick_init(struct endpoint_pick *p, const struct schema_dns_record_addresses *sel)
{
        *p = (struct endpoint_pick){ 0 };
        if (!sel)
                return true;
        if (!sel->cidr || cidr_parse(sel->cidr, &p->net) != 0)
                return false;
        p->sel = sel;
        return true;
}

void endpoint_pick_release(struct endpoint_pick *p)
{
        for (size_t i = 0; i < p->n_lists; i++)
                maas_interface_list_release(&p->lists[i]);
        free(p->lists);
        *p = (struct endpoint_pick){ 0 };
}

static bool in_net(const struct cidr *net, const char *ip)
{
        struct ip_addr a;

        return ip_addr_parse(ip, &a) == 0 && cidr_contains(net, &a);
}

static bool seen(const char *const *out, size_t n, const char *ip)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(out[i], ip) == 0)
                        return true;
        return false;
}

size_t endpoint_addresses_from_status(const cJSON *mm,
                                      const struct cidr *net,
                                      const char **out,
                                      size_t max)
{
        const cJSON *a;
        size_t n = 0;

        cJSON_ArrayForEach (a, json_find(mm, "status", "addresses", NULL)) {
                const char *type = json_find_str(a, "type", NULL);
                const char *ip = json_find_str(a, "address", NULL);

                if (n == max || !type || !ip || !*ip || strcmp(type, "ExternalIP") != 0)
                        continue;
                if (!net) {
                        out[n++] = ip;
                        break;
                }
                if (in_net(net, ip) && !seen(out, n, ip))
                        out[n++] = ip;
        }
        return n;
}

size_t endpoint_addresses_from_links(const struct maas_interface_list *l,
                                     const char *iface,
                                     const struct cidr *net,
                                     const char **out,
                                     size_t max)
{
        size_t n = 0;

        for (size_t i = 0; i < l->n; i++) {
                const struct maas_interface *f = &l->items[i];

                if (strcmp(f->name, iface) != 0)
                        continue;
                for (size_t j = 0; j < f->n_links && n < max; j++) {
                        const char *ip = f->links[j].ip;

                        if (ip && *ip && in_net(net, ip) && !seen(out, n, ip))
                                out[n++] = ip;
                }
        }
        return n;
}

/* The system ID of mm's MAAS machine, or NULL. */
static const char *system_id(const cJSON *mm)
{
        const char *sid = json_find_str(mm, "spec", "systemID", NULL);
        const char *pid = json_find_str(mm, "spec", "providerID", NULL);

        if (sid && *sid)
                return sid;
        return pid ? schema_provider_id_system_id(pid) : NULL;
}

static struct maas_interface_list *new_list(struct endpoint_pick *p)
{
        if (p->n_lists == p->cap) {
                p->cap = p->cap ? p->cap * 2 : 4;
                p->lists = xrealloc(p->lists, p->cap * sizeof(*p->lists));
        }
        p->lists[p->n_lists] = (struct maas_interface_list){ 0 };
        return &p->lists[p->n_lists];
}

int endpoint_pick_addresses(struct endpoint_pick *p,
                            struct provider *prov,
                            struct maas_client *mc,
                            const cJSON *mm,
                            const char **out,
                            size_t max,
                            size_t *ret_n)
{
        struct maas_error me = { 0 };
        struct maas_interface_list *l;
        const char *sid;
        int err;

        *ret_n = 0;
        if (!p->sel || !p->sel->interface) {
                *ret_n = endpoint_addresses_from_status(mm, p->sel ? &p->net : NULL, out, max);
                return 0;
        }
        sid = system_id(mm);
        if (!sid)
                return 0;
        l = new_list(p);
        err = maas_list_interfaces(mc, sid, l, &me);
        reconciler_maas_count(prov, "list_interfaces", err, &me);
        maas_error_release(&me);
        if (err == CM_ENOTFOUND)
                return 0; /* the machine is gone from MAAS: no address */
        if (err)
                return err;
        p->n_lists++;
        *ret_n = endpoint_addresses_from_links(l, p->sel->interface, &p->net, out, max);
        return 0;
}
