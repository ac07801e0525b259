/*
 * validate_machine: MaasMachine and MaasMachineTemplate rules. The update rules and their
 * messages are the reference's (upstream-capmaas.md 2.1); the value rules are capmaas's
 * (beyond.md B1).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "field_errors.h"
#include "json.h"
#include "validate.h"
#include "validate_rules.h"
#include "xalloc.h"

#define MIN_CPU_MAX    1024
#define MIN_MEMORY_MAX 16777216 /* MiB: 16 TiB */

static const struct rule_bounds min_cpu = { 0, MIN_CPU_MAX, true };
static const struct rule_bounds min_memory = { 0, MIN_MEMORY_MAX, true };
static const struct rule_bounds min_disk_size = { 0, INT64_MAX, false };

/* Builds "<path>.<field>" into p and returns it. */
static const char *at(struct json_path *p, const char *path, const char *field)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, field);
        return json_path_str(p);
}

void validate_machine_spec(const struct maas_machine_spec *s,
                           const char *path,
                           struct field_errors *fe,
                           struct admission_response *warn)
{
        struct json_path p;

        /* the required fields always; an optional one only when it is set (each rule
         * ignores an absent value, and its path costs more than the rule) */
        rule_image(fe, at(&p, path, "image"), s->image);
        rule_range(fe, at(&p, path, "minCPU"), s->has_min_cpu, s->min_cpu, &min_cpu);
        rule_range(fe, at(&p, path, "minMemory"), s->has_min_memory, s->min_memory, &min_memory);
        if (s->has_min_disk_size)
                rule_range(fe, at(&p, path, "minDiskSize"), true, s->min_disk_size, &min_disk_size);
        if (s->resource_pool)
                rule_maas_name(fe, at(&p, path, "resourcePool"), s->resource_pool);
        if (s->failure_domain)
                rule_maas_name(fe, at(&p, path, "failureDomain"), s->failure_domain);
        if (s->tags.n)
                rule_maas_names(fe, at(&p, path, "tags"), &s->tags);
        if (s->provider_id)
                rule_provider_id(fe, at(&p, path, "providerID"), s->provider_id);
        if (s->system_id)
                rule_maas_name(fe, at(&p, path, "systemID"), s->system_id);
        validate_machine_lxd(s, path, fe);
        validate_machine_addresses(s, path, fe, warn);
        validate_deploy_options(s, path, fe);
        validate_machine_unused(s, path, fe);
        validate_machine_reuse(s, path, fe);
        if (warn && s->has_min_cpu && s->has_min_memory && s->min_cpu == 0 && s->min_memory == 0)
                admission_response_warn(warn,
                                        "%s.minCPU and %s.minMemory are both 0: any machine "
                                        "will do",
                                        path, path);
}

char *machine_spec_immutable(const struct maas_machine_spec *old,
                             const struct maas_machine_spec *cur,
                             const char *what)
{
        if (old->image && cur->image && strcmp(old->image, cur->image) != 0)
                return xasprintf("maas %s image change is not allowed, old=%s, new=%s", what,
                                 old->image, cur->image);
        if (old->has_min_cpu && cur->has_min_cpu && old->min_cpu != cur->min_cpu)
                return xasprintf("maas %s min cpu count change is not allowed, old=%" PRId64
                                 ", new=%" PRId64,
                                 what, old->min_cpu, cur->min_cpu);
        if (old->has_min_memory && cur->has_min_memory && old->min_memory != cur->min_memory)
                return xasprintf("maas %s min memory change is not allowed, old=%" PRId64
                                 " MB, new=%" PRId64 " MB",
                                 what, old->min_memory, cur->min_memory);
        return NULL;
}

/* The stored object reached provisioning: status.initialization.provisioned, or ready (the
 * v1beta1 contract's field, all the reference provider writes). */
static bool provisioned(const cJSON *obj)
{
        return cJSON_IsTrue(json_find(obj, "status", "initialization", "provisioned", NULL)) ||
               cJSON_IsTrue(json_find(obj, "status", "ready", NULL));
}

void machine_provider_id_update(const cJSON *old_json,
                                const union webhook_obj *old,
                                const union webhook_obj *cur,
                                struct field_errors *fe)
{
        const struct maas_machine *o = &old->machine, *c = &cur->machine;
        const char *was = o->spec.provider_id, *now = c->spec.provider_id;

        if (!was || !*was || o->meta.deletion_timestamp || !provisioned(old_json))
                return;
        if (now && strcmp(was, now) == 0)
                return;
        if (now)
                field_invalid_str(fe, "spec.providerID", now,
                                  "field is immutable once the machine is provisioned (was %s)",
                                  was);
        else
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, "spec.providerID", NULL,
                                 "may not be removed once the machine is provisioned (was %s)",
                                 was);
}

void machine_update(const cJSON *old_json,
                    const union webhook_obj *old,
                    const union webhook_obj *cur,
                    struct field_errors *fe)
{
        machine_provider_id_update(old_json, old, cur, fe);
        machine_addresses_update(&old->machine.spec, &cur->machine.spec, fe);
        deploy_options_update(&old->machine.spec, &cur->machine.spec, fe);
}

/* ---- the spec_ops of MaasMachine and MaasMachineTemplate ---- */

static void machine_check(const void *spec,
                          const char *path,
                          struct field_errors *fe,
                          struct admission_response *warn)
{
        validate_machine_spec(spec, path, fe, warn);
}

static char *machine_immutable(const void *old, const void *cur, const char *what)
{
        return machine_spec_immutable(old, cur, what);
}

static void machine_maas(const void *spec, struct maas_check *c)
{
        maas_check_machine_spec(spec, c);
}

static bool machine_same(const void *a, const void *b)
{
        return maas_machine_spec_same(a, b);
}

const struct spec_ops spec_ops_machine = {
        .check = machine_check,
        .immutable = machine_immutable,
        .defaults = defaults_machine_spec,
        .maas_check = machine_maas,
        .maas_same = machine_same,
};

static void machine_template_check(const void *spec,
                                   const char *path,
                                   struct field_errors *fe,
                                   struct admission_response *warn)
{
        validate_machine_spec(spec, path, fe, warn);
        validate_template_static_ip(spec, path, warn);
        validate_template_reuse(spec, path, warn);
}

const struct spec_ops spec_ops_machine_template = {
        .check = machine_template_check,
        .immutable = machine_immutable,
        .defaults = defaults_machine_spec,
        .maas_check = machine_maas,
        .maas_same = machine_same,
};
