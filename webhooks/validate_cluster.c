/*
 * validate_cluster: MaasCluster and MaasClusterTemplate rules. The dnsDomain update rule and
 * its message are the reference's (upstream-capmaas.md 2.1); the value rules are capmaas's.
 */
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "field_errors.h"
#include "json.h"
#include "validate.h"
#include "validate_rules.h"
#include "xalloc.h"

static const char *at(struct json_path *p, const char *path, const char *field)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, field);
        return json_path_str(p);
}

static void validate_endpoint(const struct schema_api_endpoint *ep,
                              const char *path,
                              struct field_errors *fe)
{
        struct json_path p;
        const char *host = ep->host ? ep->host : "";
        bool has_port = ep->has_port && ep->port != 0;

        if (host[0]) {
                rule_host(fe, at(&p, path, "controlPlaneEndpoint.host"), host);
                if (has_port)
                        rule_port(fe, at(&p, path, "controlPlaneEndpoint.port"), ep->port);
        } else if (has_port) {
                field_required(fe, at(&p, path, "controlPlaneEndpoint.host"));
        }
}

static void validate_lxd_config(const struct maas_lxd_config *c,
                                const char *path,
                                struct field_errors *fe)
{
        struct json_path p;
        char *q;

        rule_maas_name(fe, at(&p, path, "lxdConfig.resourcePool"), c->resource_pool);
        rule_maas_name(fe, at(&p, path, "lxdConfig.zone"), c->zone);
        if (c->nic_type && strcmp(c->nic_type, "bridge") != 0 &&
            strcmp(c->nic_type, "macvlan") != 0) {
                q = field_quote(c->nic_type);
                field_errors_add(fe, FIELD_ERR_NOT_SUPPORTED, at(&p, path, "lxdConfig.nicType"), q,
                                 "supported values: \"bridge\", \"macvlan\"");
                free(q);
        }
}

/* lxdConfig.enabled asks capmaas to turn the cluster's machines into LXD VM hosts: out of
 * scope (issue #21), so it is refused rather than ignored. With enabled false or absent the
 * other lxdConfig fields ask nothing. */
static void deny_lxd_hosts(const struct maas_lxd_config *c,
                           const char *path,
                           struct field_errors *fe)
{
        struct json_path p;

        if (c && c->has_enabled && c->enabled)
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, at(&p, path, "lxdConfig.enabled"), NULL,
                                 "not supported: turning a cluster's machines into LXD VM hosts is "
                                 "out of scope for capmaas; register VM hosts in MAAS and set "
                                 "lxd.enabled on the MaasMachines to compose VMs on them");
}

/* identityRef: a Secret of the cluster's namespace, named as Kubernetes names Secrets. */
static void validate_identity_ref(const struct schema_identity_ref *r,
                                  const char *path,
                                  struct field_errors *fe)
{
        struct json_path p;
        char *q;

        if (!r->kind || !r->kind[0]) {
                field_required(fe, at(&p, path, "identityRef.kind"));
        } else if (strcmp(r->kind, "Secret") != 0) {
                q = field_quote(r->kind);
                field_errors_add(fe, FIELD_ERR_NOT_SUPPORTED, at(&p, path, "identityRef.kind"), q,
                                 "supported values: \"Secret\"");
                free(q);
        }
        rule_dns_domain(fe, at(&p, path, "identityRef.name"), r->name);
}

void validate_cluster_spec(const struct maas_cluster_spec *s,
                           const char *path,
                           struct field_errors *fe)
{
        struct json_path p;

        rule_dns_domain(fe, at(&p, path, "dnsDomain"), s->dns_domain);
        if (s->control_plane_endpoint)
                validate_endpoint(s->control_plane_endpoint, path, fe);
        rule_maas_names(fe, at(&p, path, "failureDomains"), &s->failure_domains);
        if (s->lxd_config)
                validate_lxd_config(s->lxd_config, path, fe);
        deny_lxd_hosts(s->lxd_config, path, fe);
        if (s->dns_record_addresses)
                validate_dns_record_addresses(s->dns_record_addresses, path, fe);
        if (s->identity_ref)
                validate_identity_ref(s->identity_ref, path, fe);
        validate_endpoint_spec(s, path, fe);
}

/* ---- the spec_ops of MaasCluster and MaasClusterTemplate (no reference counterpart for
 * the template: its whole spec is immutable, checked by kinds.c) ---- */

static void cluster_check(const void *spec,
                          const char *path,
                          struct field_errors *fe,
                          struct admission_response *warn)
{
        (void)warn;
        validate_cluster_spec(spec, path, fe);
}

static char *cluster_immutable(const void *old, const void *cur, const char *what)
{
        const struct maas_cluster_spec *o = old, *c = cur;
        const char *a = o->dns_domain ? o->dns_domain : "";
        const char *b = c->dns_domain ? c->dns_domain : "";

        const char *ia = o->identity_ref && o->identity_ref->name ? o->identity_ref->name : "";
        const char *ib = c->identity_ref && c->identity_ref->name ? c->identity_ref->name : "";

        (void)what;
        if (strcmp(a, b) != 0)
                return xstrdup("changing cluster DNS Domain not allowed");
        /* the cluster's machines live in the MAAS the Secret names: a new Secret could name
         * another region, where they would be lost */
        if (strcmp(ia, ib) != 0)
                return xstrdup("changing spec.identityRef not allowed: the cluster's machines "
                               "belong to the MAAS it names; rotate the Secret's apiKey instead");
        return NULL;
}

static void cluster_maas(const void *spec, struct maas_check *c)
{
        maas_check_cluster_spec(spec, c);
}

static bool cluster_same(const void *a, const void *b)
{
        return maas_cluster_spec_same(a, b);
}

const struct spec_ops spec_ops_cluster = {
        .check = cluster_check,
        .immutable = cluster_immutable,
        .defaults = defaults_cluster_spec,
        .maas_check = cluster_maas,
        .maas_same = cluster_same,
};
