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
}

/* ---- MaasCluster ---- */

static int cluster_decode(const cJSON *obj, union webhook_obj *ret, struct json_errors *errs)
{
        return maas_cluster_decode_view(obj, &ret->cluster, errs);
}

static void cluster_release(union webhook_obj *o)
{
        maas_cluster_release(&o->cluster);
}

static void cluster_check(const union webhook_obj *o,
                          struct field_errors *fe,
                          struct admission_response *warn)
{
        (void)warn;
        validate_cluster_spec(&o->cluster.spec, "spec", fe);
}

static char *cluster_immutable(const union webhook_obj *old, const union webhook_obj *cur)
{
        const char *a = old->cluster.spec.dns_domain ? old->cluster.spec.dns_domain : "";
        const char *b = cur->cluster.spec.dns_domain ? cur->cluster.spec.dns_domain : "";

        return strcmp(a, b) != 0 ? xstrdup("changing cluster DNS Domain not allowed") : NULL;
}

static void cluster_maas(const union webhook_obj *o,
                         const struct maas_inventory_snapshot *s,
                         struct field_errors *fe,
                         struct admission_response *warn,
                         bool *miss)
{
        (void)warn;
        maas_check_cluster_spec(&o->cluster.spec, "spec", s, fe, miss);
}

static bool cluster_same(const union webhook_obj *a, const union webhook_obj *b)
{
        return maas_cluster_spec_same(&a->cluster.spec, &b->cluster.spec);
}

const struct kind_ops kind_ops_cluster = {
        .kind = SCHEMA_KIND_CLUSTER,
        .is_template = false,
        .spec_field = "spec",
        .spec_pointer = "/spec",
        .decode = cluster_decode,
        .release = cluster_release,
        .check = cluster_check,
        .immutable = cluster_immutable,
        .defaults = defaults_cluster_spec,
        .maas_check = cluster_maas,
        .maas_same = cluster_same,
};

/* ---- MaasClusterTemplate (no reference counterpart: the whole template spec is
 * immutable, checked by kinds.c) ---- */

static int template_decode(const cJSON *obj, union webhook_obj *ret, struct json_errors *errs)
{
        return maas_cluster_template_decode_view(obj, &ret->cluster_template, errs);
}

static void template_release(union webhook_obj *o)
{
        maas_cluster_template_release(&o->cluster_template);
}

static void template_check(const union webhook_obj *o,
                           struct field_errors *fe,
                           struct admission_response *warn)
{
        (void)warn;
        validate_cluster_spec(&o->cluster_template.spec, "spec.template.spec", fe);
}

static char *template_immutable(const union webhook_obj *old, const union webhook_obj *cur)
{
        (void)old;
        (void)cur;
        return NULL;
}

static void template_maas(const union webhook_obj *o,
                          const struct maas_inventory_snapshot *s,
                          struct field_errors *fe,
                          struct admission_response *warn,
                          bool *miss)
{
        (void)warn;
        maas_check_cluster_spec(&o->cluster_template.spec, "spec.template.spec", s, fe, miss);
}

static bool template_same(const union webhook_obj *a, const union webhook_obj *b)
{
        return maas_cluster_spec_same(&a->cluster_template.spec, &b->cluster_template.spec);
}

const struct kind_ops kind_ops_cluster_template = {
        .kind = SCHEMA_KIND_CLUSTER_TEMPLATE,
        .is_template = true,
        .spec_field = "spec.template.spec",
        .spec_pointer = "/spec/template/spec",
        .decode = template_decode,
        .release = template_release,
        .check = template_check,
        .immutable = template_immutable,
        .defaults = defaults_cluster_spec,
        .maas_check = template_maas,
        .maas_same = template_same,
};
