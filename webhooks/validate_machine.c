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

        rule_image(fe, at(&p, path, "image"), s->image);
        rule_range(fe, at(&p, path, "minCPU"), s->has_min_cpu, s->min_cpu, 0, MIN_CPU_MAX, true);
        rule_range(fe, at(&p, path, "minMemory"), s->has_min_memory, s->min_memory, 0,
                   MIN_MEMORY_MAX, true);
        rule_range(fe, at(&p, path, "minDiskSize"), s->has_min_disk_size, s->min_disk_size, 0,
                   INT64_MAX, false);
        rule_maas_name(fe, at(&p, path, "resourcePool"), s->resource_pool);
        rule_maas_name(fe, at(&p, path, "failureDomain"), s->failure_domain);
        rule_maas_names(fe, at(&p, path, "tags"), &s->tags);
        rule_provider_id(fe, at(&p, path, "providerID"), s->provider_id);
        rule_maas_name(fe, at(&p, path, "systemID"), s->system_id);
        if (s->lxd && s->lxd->vm_config)
                rule_range(fe, at(&p, path, "lxd.vmConfig.diskSize"),
                           s->lxd->vm_config->has_disk_size, s->lxd->vm_config->disk_size, 1,
                           INT64_MAX, false);
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

/* ---- MaasMachine ---- */

static int machine_decode(const cJSON *obj, union webhook_obj *ret, struct json_errors *errs)
{
        return maas_machine_decode_view(obj, &ret->machine, errs);
}

static void machine_release(union webhook_obj *o)
{
        maas_machine_release(&o->machine);
}

static void machine_check(const union webhook_obj *o,
                          struct field_errors *fe,
                          struct admission_response *warn)
{
        validate_machine_spec(&o->machine.spec, "spec", fe, warn);
}

static char *machine_immutable(const union webhook_obj *old, const union webhook_obj *cur)
{
        return machine_spec_immutable(&old->machine.spec, &cur->machine.spec, "machine");
}

static void machine_maas(const union webhook_obj *o,
                         const struct maas_inventory_snapshot *s,
                         struct field_errors *fe,
                         struct admission_response *warn,
                         bool *miss)
{
        maas_check_machine_spec(&o->machine.spec, "spec", s, fe, warn, miss);
}

static bool machine_same(const union webhook_obj *a, const union webhook_obj *b)
{
        return maas_machine_spec_same(&a->machine.spec, &b->machine.spec);
}

const struct kind_ops kind_ops_machine = {
        .kind = SCHEMA_KIND_MACHINE,
        .is_template = false,
        .spec_field = "spec",
        .spec_pointer = "/spec",
        .decode = machine_decode,
        .release = machine_release,
        .check = machine_check,
        .immutable = machine_immutable,
        .defaults = defaults_machine_spec,
        .maas_check = machine_maas,
        .maas_same = machine_same,
};

/* ---- MaasMachineTemplate ---- */

static int template_decode(const cJSON *obj, union webhook_obj *ret, struct json_errors *errs)
{
        return maas_machine_template_decode_view(obj, &ret->machine_template, errs);
}

static void template_release(union webhook_obj *o)
{
        maas_machine_template_release(&o->machine_template);
}

static void template_check(const union webhook_obj *o,
                           struct field_errors *fe,
                           struct admission_response *warn)
{
        validate_machine_spec(&o->machine_template.spec, "spec.template.spec", fe, warn);
}

static char *template_immutable(const union webhook_obj *old, const union webhook_obj *cur)
{
        return machine_spec_immutable(&old->machine_template.spec, &cur->machine_template.spec,
                                      "machine template");
}

static void template_maas(const union webhook_obj *o,
                          const struct maas_inventory_snapshot *s,
                          struct field_errors *fe,
                          struct admission_response *warn,
                          bool *miss)
{
        maas_check_machine_spec(&o->machine_template.spec, "spec.template.spec", s, fe, warn, miss);
}

static bool template_same(const union webhook_obj *a, const union webhook_obj *b)
{
        return maas_machine_spec_same(&a->machine_template.spec, &b->machine_template.spec);
}

const struct kind_ops kind_ops_machine_template = {
        .kind = SCHEMA_KIND_MACHINE_TEMPLATE,
        .is_template = true,
        .spec_field = "spec.template.spec",
        .spec_pointer = "/spec/template/spec",
        .decode = template_decode,
        .release = template_release,
        .check = template_check,
        .immutable = template_immutable,
        .defaults = defaults_machine_spec,
        .maas_check = template_maas,
        .maas_same = template_same,
};
