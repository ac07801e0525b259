#pragma once
/*
 * maascluster_addresses: which of a control plane's addresses the MaasCluster's API-endpoint
 * DNS record may hold (docs/static-ips.md "Endpoint addresses"). Without
 * spec.dnsRecordAddresses: the machine's first ExternalIP (the reference's rule). With it:
 * every ExternalIP inside its cidr; with its interface too, the addresses MAAS links on the
 * interface of that name and inside the cidr (read from MAAS: GET nodes/<id>/interfaces/,
 * one call per control plane and pass, only when an interface is named). Internal to the
 * MaasCluster reconciler; a pick belongs to one pass on one worker thread.
 */

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "cidr.h"
#include "maas_client.h"
#include "schema.h"

struct provider;

#define ENDPOINT_ADDRS_PER_CP 8 /* addresses one control plane may give the record */

struct endpoint_pick {
        const struct schema_dns_record_addresses *sel; /* NULL: the default rule */
        struct cidr net;
        /* interface lists read from MAAS (owned), so the picked addresses stay valid */
        struct maas_interface_list *lists;
        size_t n_lists, cap;
};

/* sel (borrowed, may be NULL) as given by the MaasCluster spec. A cidr that does not parse
 * (admission refuses it; a stored object may predate it) falls back to the default rule,
 * returned false so the caller can say so. */
bool endpoint_pick_init(struct endpoint_pick *p, const struct schema_dns_record_addresses *sel);
void endpoint_pick_release(struct endpoint_pick *p);

/* The addresses of MaasMachine mm the record may hold into out (at most max; borrowed from mm
 * or from p, valid until endpoint_pick_release); *ret_n their count. A MAAS error reading
 * the interfaces is returned (counted under op list_interfaces). */
MUST_CHECK int endpoint_pick_addresses(struct endpoint_pick *p,
                                       struct provider *prov,
                                       struct maas_client *mc,
                                       const cJSON *mm,
                                       const char **out,
                                       size_t max,
                                       size_t *ret_n);

/* Pure parts, for tests: the ExternalIPs of mm's status.addresses inside net (NULL: only the
 * first ExternalIP); and the addresses on interface iface of l inside net. */
size_t endpoint_addresses_from_status(const cJSON *mm,
                                      const struct cidr *net,
                                      const char **out,
                                      size_t max);
size_t endpoint_addresses_from_links(const struct maas_interface_list *l,
                                     const char *iface,
                                     const struct cidr *net,
                                     const char **out,
                                     size_t max);
