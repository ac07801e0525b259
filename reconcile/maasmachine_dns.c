/*
 * maasmachine_dns: whether a control-plane machine's address is in its cluster's API
 * endpoint record (the MaasCluster's dns-record annotation, else status.network.dnsName),
 * read from MAAS. Asking also
 * nudges the MaasCluster controller, which owns the record. A cluster whose spec.endpoint.type
 * is VIP or External has no such record (maasmachine_dns_expected).
 */
#include <stdlib.h>
#include <string.h>

#include "maasmachine_context.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

static char *endpoint_fqdn(struct maasmachine_ctx *c)
{
        const char *infra = capi_ref_name(&c->p->capi, kube_object_json(c->cluster),
                                          "infrastructureRef", SCHEMA_GROUP, SCHEMA_KIND_CLUSTER);
        struct kube_object *mc = infra ? informer_get(c->p->maasclusters, c->ns, infra) : NULL;
        const cJSON *mcj = mc ? kube_object_json(mc) : NULL;
        /* the annotation first: after a move the MaasCluster's status is empty */
        const char *ann = json_find_str(mcj, "metadata", "annotations",
                                        RECONCILER_ANNOTATION_DNS_RECORD, NULL);
        const char *dns = ann ? ann : json_find_str(mcj, "status", "network", "dnsName", NULL);
        char *out = dns ? xstrdup(dns) : NULL;

        if (mc && c->p->cluster_ctl)
                controller_enqueue(c->p->cluster_ctl, c->ns, kube_object_name(mc));
        kube_object_unref(mc);
        return out;
}

bool maasmachine_dns_expected(struct maasmachine_ctx *c)
{
        const char *infra =
                c->cluster ? capi_ref_name(&c->p->capi, kube_object_json(c->cluster),
                                           "infrastructureRef", SCHEMA_GROUP, SCHEMA_KIND_CLUSTER)
                           : NULL;
        struct kube_object *mc = infra ? informer_get(c->p->maasclusters, c->ns, infra) : NULL;
        const char *type =
                mc ? json_find_str(kube_object_json(mc), "spec", "endpoint", "type", NULL) : NULL;
        /* a VIP or External endpoint has no record of the control planes' addresses */
        bool expected = !type || strcmp(type, SCHEMA_ENDPOINT_DNS) == 0;

        kube_object_unref(mc);
        return expected;
}

int maasmachine_dns_registered(struct maasmachine_ctx *c, bool *ret)
{
        char *fqdn = c->cluster ? endpoint_fqdn(c) : NULL;
        struct maas_dns_list l = { 0 };
        struct maas_dns_resource cached = { 0 };
        struct maas_error me = { 0 };
        bool found = false;
        int err = 0;

        if (!fqdn)
                goto out;
        /* the MaasCluster's view of its record, when recent and holding our address */
        if (c->have_node && reconciler_dns_cached(c->p, fqdn, &cached)) {
                for (size_t j = 0; j < cached.ips.n; j++)
                        for (size_t k = 0; k < c->node.ip_addresses.n; k++)
                                found = found ||
                                        strcmp(cached.ips.v[j], c->node.ip_addresses.v[k]) == 0;
                maas_dns_resource_release(&cached);
                if (found)
                        goto out;
        }
        err = maas_list_dns_resources(c->w->maas, fqdn, &l, &me);
        reconciler_maas_count(c->p, "list_dns_resources", err, &me);
        for (size_t i = 0; err == 0 && i < l.n; i++)
                for (size_t j = 0; j < l.items[i].ips.n; j++)
                        for (size_t k = 0; c->have_node && k < c->node.ip_addresses.n; k++)
                                found = found ||
                                        strcmp(l.items[i].ips.v[j], c->node.ip_addresses.v[k]) == 0;
out:
        if (err == 0)
                *ret = found;
        maas_dns_list_release(&l);
        maas_error_release(&me);
        free(fqdn);
        return err;
}
