/*
 * validate_deploy_options: the value rules and update rules of the deploy and allocation
 * options of a MaasMachine spec (hweKernel, architecture, excludeTags, storageLayout,
 * deployInMemory, minDiskSize; docs/deploy-options.md), and the denial of the MaasMachine
 * fields capmaas does not act on. Values are refused when MAAS would refuse them or, worse,
 * take them and do nothing (a kernel name without a ga or hwe part is ignored by MAAS's
 * get_working_kernel; a layout option of another layout is ignored by its form).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "field_errors.h"
#include "json.h"
#include "validate.h"
#include "validate_rules.h"
#include "xalloc.h"

#define NAME_MAX_LEN  64
#define LVM_NAME_MAX  127
#define MIN_BOOT_SIZE 536870912LL  /* MAAS's MIN_BOOT_PARTITION_SIZE, 512 MiB */
#define MIN_ROOT_SIZE 3221225472LL /* MAAS's MIN_ROOT_PARTITION_SIZE, 3 GiB */

static const char *at(struct json_path *p, const char *path, const char *field)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, field);
        return json_path_str(p);
}

static bool only(const char *s, const char *set)
{
        for (; *s; s++)
                if (!isalnum((unsigned char)*s) && !strchr(set, *s))
                        return false;
        return true;
}

/* Some '-'-separated part of k is "ga" or "hwe" (what MAAS's get_working_kernel asks). */
static bool ga_or_hwe_part(const char *k)
{
        for (const char *p = k; *p;) {
                size_t n = strcspn(p, "-");

                if ((n == 2 && strncmp(p, "ga", 2) == 0) || (n == 3 && strncmp(p, "hwe", 3) == 0))
                        return true;
                p += n;
                if (*p)
                        p++;
        }
        return false;
}

/* MAAS kernel names: ga-22.04, hwe-22.04, hwe-22.04-lowlatency, hwe-t; lower case. */
static bool kernel_name(const char *k)
{
        if (!*k || strlen(k) > NAME_MAX_LEN || !only(k, "-.") || k[0] == '-')
                return false;
        for (const char *p = k; *p; p++)
                if (isupper((unsigned char)*p))
                        return false;
        return ga_or_hwe_part(k);
}

/* amd64, arm64, amd64/generic, arm64/xgene-uboot */
static bool arch_name(const char *a)
{
        const char *slash = strchr(a, '/');
        size_t head = slash ? (size_t)(slash - a) : strlen(a);

        if (head == 0 || strlen(a) > NAME_MAX_LEN || (slash && !slash[1]))
                return false;
        for (size_t i = 0; i < head; i++)
                if (!islower((unsigned char)a[i]) && !isdigit((unsigned char)a[i]))
                        return false;
        return !slash || (only(slash + 1, "-._") && !strchr(slash + 1, '/'));
}

/* MAAS's BytesOrPercentageField: digits with one K/M/G/T/P/E (powers of 1000), or a
 * percentage. *ret_bytes is -1 for a percentage. */
static bool size_value(const char *v, long long *ret_bytes, double *ret_pct)
{
        static const char units[] = "KkMmGgTtPpEe";
        const char *p = v;
        char *end = NULL;
        long long n, mul = 1;

        if (!isdigit((unsigned char)*v))
                return false;
        if (strchr(v, '%')) {
                *ret_pct = strtod(v, &end);
                *ret_bytes = -1;
                return end != v && strcmp(end, "%") == 0;
        }
        while (isdigit((unsigned char)*p))
                p++;
        if (p - v > 15)
                return false;
        if (*p) {
                const char *u = strchr(units, *p);

                if (!u || p[1])
                        return false;
                for (long i = 0; i <= (u - units) / 2; i++)
                        mul *= 1000;
        }
        n = strtoll(v, NULL, 10);
        if (mul > 1 && n > (long long)9e18 / mul)
                return false;
        *ret_bytes = n * mul;
        return true;
}

static void rule_size(struct field_errors *fe, const char *field, const char *v, long long min)
{
        long long bytes = 0;
        double pct = 0;

        if (!v)
                return;
        if (!size_value(v, &bytes, &pct))
                field_invalid_str(fe, field, v,
                                  "must be a size in bytes with an optional K, M, G, T, P or E "
                                  "suffix (powers of 1000), or a percentage such as 50%%");
        else if (bytes < 0 && (pct <= 0 || pct > 100))
                field_invalid_str(fe, field, v, "a percentage must be above 0%% and at most 100%%");
        else if (bytes >= 0 && bytes < min)
                field_invalid_str(fe, field, v, "must be at least %lld bytes (MAAS's minimum)",
                                  min);
}

static void rule_lvm_name(struct field_errors *fe, const char *field, const char *v)
{
        if (!v)
                return;
        if (!*v || strlen(v) > LVM_NAME_MAX || v[0] == '-' || strcmp(v, ".") == 0 ||
            strcmp(v, "..") == 0 || !only(v, "+_.-"))
                field_invalid_str(fe, field, v,
                                  "must be an LVM name: letters, digits and +_.- , not "
                                  "starting with -, at most %d characters",
                                  LVM_NAME_MAX);
}

/* An option of another layout: MAAS's form for this layout would drop it. */
static void forbid_option(struct field_errors *fe,
                          const char *path,
                          const char *field,
                          bool set,
                          const char *type,
                          const char *needs)
{
        struct json_path p;
        char *f;

        if (!set)
                return;
        f = xasprintf("storageLayout.%s", field);
        field_errors_add(fe, FIELD_ERR_FORBIDDEN, at(&p, path, f), NULL,
                         "%s: the %s layout does not take it", needs, type);
        free(f);
}

static void rule_storage_layout(const struct schema_storage_layout *l,
                                const char *path,
                                struct field_errors *fe)
{
        static const char *const types[] = { "flat", "lvm", "bcache", "blank" };
        struct json_path p;
        const char *t = l->type;
        bool known = false, lvm, bcache, blank;
        char *q;

        for (size_t i = 0; t && i < ARRAY_SIZE(types); i++)
                known = known || strcmp(t, types[i]) == 0;
        if (!t) {
                field_required(fe, at(&p, path, "storageLayout.type"));
                return;
        }
        if (!known) {
                q = field_quote(t);
                field_errors_add(fe, FIELD_ERR_NOT_SUPPORTED, at(&p, path, "storageLayout.type"), q,
                                 "supported values: \"flat\", \"lvm\", \"bcache\", \"blank\"");
                free(q);
                return;
        }
        lvm = strcmp(t, "lvm") == 0;
        bcache = strcmp(t, "bcache") == 0;
        blank = strcmp(t, "blank") == 0;
        forbid_option(fe, path, "bootSize", blank && l->boot_size, t, "a partition size");
        forbid_option(fe, path, "rootSize", blank && l->root_size, t, "a partition size");
        forbid_option(fe, path, "vgName", !lvm && l->vg_name, t, "only with type lvm");
        forbid_option(fe, path, "lvName", !lvm && l->lv_name, t, "only with type lvm");
        forbid_option(fe, path, "lvSize", !lvm && l->lv_size, t, "only with type lvm");
        forbid_option(fe, path, "cacheMode", !bcache && l->cache_mode, t, "only with type bcache");
        forbid_option(fe, path, "cacheSize", !bcache && l->cache_size, t, "only with type bcache");
        forbid_option(fe, path, "cacheNoPart", !bcache && l->has_cache_no_part, t,
                      "only with type bcache");
        rule_size(fe, at(&p, path, "storageLayout.bootSize"), l->boot_size, MIN_BOOT_SIZE);
        rule_size(fe, at(&p, path, "storageLayout.rootSize"), l->root_size, MIN_ROOT_SIZE);
        rule_size(fe, at(&p, path, "storageLayout.lvSize"), l->lv_size, MIN_ROOT_SIZE);
        rule_size(fe, at(&p, path, "storageLayout.cacheSize"), l->cache_size, 1);
        rule_lvm_name(fe, at(&p, path, "storageLayout.vgName"), l->vg_name);
        rule_lvm_name(fe, at(&p, path, "storageLayout.lvName"), l->lv_name);
        if (l->cache_mode && strcmp(l->cache_mode, "writeback") != 0 &&
            strcmp(l->cache_mode, "writethrough") != 0 &&
            strcmp(l->cache_mode, "writearound") != 0) {
                q = field_quote(l->cache_mode);
                field_errors_add(fe, FIELD_ERR_NOT_SUPPORTED,
                                 at(&p, path, "storageLayout.cacheMode"), q,
                                 "supported values: \"writeback\", \"writethrough\", "
                                 "\"writearound\"");
                free(q);
        }
}

static void rule_exclude_tags(const struct maas_machine_spec *s,
                              const char *path,
                              struct field_errors *fe)
{
        struct json_path p;

        if (!s->exclude_tags.n)
                return;
        rule_maas_names(fe, at(&p, path, "excludeTags"), &s->exclude_tags);
        for (size_t i = 0; i < s->exclude_tags.n; i++) {
                if (schema_strv_find(&s->tags, s->exclude_tags.items[i]) < 0)
                        continue;
                json_path_init(&p, path);
                (void)json_path_push_field(&p, "excludeTags");
                (void)json_path_push_index(&p, i);
                field_invalid_str(fe, json_path_str(&p), s->exclude_tags.items[i],
                                  "is also in tags: no machine can both carry and lack it");
        }
}

void validate_deploy_options(const struct maas_machine_spec *s,
                             const char *path,
                             struct field_errors *fe)
{
        struct json_path p;

        if (s->hwe_kernel && !kernel_name(s->hwe_kernel))
                field_invalid_str(fe, at(&p, path, "hweKernel"), s->hwe_kernel,
                                  "must be a MAAS kernel name with a ga or hwe part (e.g. "
                                  "ga-22.04, hwe-22.04, hwe-22.04-lowlatency); MAAS ignores any "
                                  "other");
        if (s->architecture && !arch_name(s->architecture))
                field_invalid_str(fe, at(&p, path, "architecture"), s->architecture,
                                  "must be a MAAS architecture: <arch> or <arch>/<subarch> (e.g. "
                                  "amd64, arm64/generic)");
        rule_exclude_tags(s, path, fe);
        if (s->storage_layout)
                rule_storage_layout(s->storage_layout, path, fe);
}

/* ---- fields capmaas does not act on ---- */

void validate_machine_unused(const struct maas_machine_spec *s,
                             const char *path,
                             struct field_errors *fe)
{
        struct json_path p;
        bool vm = s->lxd && s->lxd->has_enabled && s->lxd->enabled;

        /* parent names a VM's host; a bare-metal machine has none, so it would be ignored */
        if (s->parent && !vm)
                field_errors_add(fe, FIELD_ERR_FORBIDDEN, at(&p, path, "parent"), NULL,
                                 "only for an LXD VM (lxd.enabled): a bare-metal machine has no "
                                 "parent host");
}

/* ---- updates ---- */

static bool str_eq(const char *a, const char *b)
{
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool strv_eq(const struct schema_strv *a, const struct schema_strv *b)
{
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (strcmp(a->items[i], b->items[i]) != 0)
                        return false;
        return true;
}

static bool layout_eq(const struct schema_storage_layout *a, const struct schema_storage_layout *b)
{
        if (!a || !b)
                return a == b;
        return str_eq(a->type, b->type) && str_eq(a->boot_size, b->boot_size) &&
               str_eq(a->root_size, b->root_size) && str_eq(a->vg_name, b->vg_name) &&
               str_eq(a->lv_name, b->lv_name) && str_eq(a->lv_size, b->lv_size) &&
               str_eq(a->cache_mode, b->cache_mode) && str_eq(a->cache_size, b->cache_size) &&
               (a->has_cache_no_part && a->cache_no_part) ==
                       (b->has_cache_no_part && b->cache_no_part);
}

static void immutable(struct field_errors *fe, const char *field, bool same)
{
        if (!same)
                field_errors_add(fe, FIELD_ERR_INVALID, field, NULL,
                                 "field is immutable: MAAS applied it when the machine was "
                                 "allocated or deployed");
}

void deploy_options_update(const struct maas_machine_spec *old,
                           const struct maas_machine_spec *cur,
                           struct field_errors *fe)
{
        immutable(fe, "spec.hweKernel", str_eq(old->hwe_kernel, cur->hwe_kernel));
        immutable(fe, "spec.architecture", str_eq(old->architecture, cur->architecture));
        immutable(fe, "spec.excludeTags", strv_eq(&old->exclude_tags, &cur->exclude_tags));
        immutable(fe, "spec.storageLayout", layout_eq(old->storage_layout, cur->storage_layout));
        immutable(fe, "spec.deployInMemory",
                  (old->has_deploy_in_memory && old->deploy_in_memory) ==
                          (cur->has_deploy_in_memory && cur->deploy_in_memory));
        immutable(fe, "spec.minDiskSize",
                  (old->has_min_disk_size ? old->min_disk_size : 0) ==
                          (cur->has_min_disk_size ? cur->min_disk_size : 0));
}
