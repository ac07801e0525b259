/*
 * validate_maas: the checks against the MAAS inventory cache (beyond.md B1). Names (pool,
 * zone, tags, image, DNS domain) must exist in MAAS; some machine in that pool and zone with
 * all those tags must be able to satisfy minCPU and minMemory, else the denial names the field
 * and the best MAAS has; when machines fit but none is free, a warning says so. A name the
 * cache lacks, or a spec nothing in it fits, gets one bounded synchronous refresh before the
 * verdict (what MAAS gained since the last refresh may make it right). The checks never block
 * on MAAS: with no usable inventory the object is allowed with a warning saying why.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "buf.h"
#include "field_errors.h"
#include "json.h"
#include "maas_inventory.h"
#include "validate.h"
#include "xalloc.h"

#define KNOWN_MAX 10 /* names listed in a denial */
#define TEXT_MAX  4096

static const char *const kind_words[MAAS_INV_KIND_COUNT] = {
        [MAAS_INV_ZONE] = "zone",
        [MAAS_INV_POOL] = "resource pool",
        [MAAS_INV_TAG] = "tag",
        [MAAS_INV_DOMAIN] = "DNS domain",
        [MAAS_INV_IMAGE] = "boot resource",
};

static const char *at(struct json_path *p, const char *path, const char *field)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, field);
        return json_path_str(p);
}

/* "a, b, c" (at most KNOWN_MAX names, then ", ..."); "none" when empty. */
static char *known_list(const struct maas_inventory_snapshot *s, enum maas_inv_kind k)
{
        const struct maas_inv_names *n = &s->names[k];
        struct buf b;
        size_t len;
        int r = 0;

        if (n->n == 0)
                return xstrdup("none");
        buf_init(&b, TEXT_MAX);
        for (size_t i = 0; i < n->n && i < KNOWN_MAX && r == 0; i++)
                r = buf_printf(&b, "%s%s", i ? ", " : "", n->v[i]);
        if (r == 0 && n->n > KNOWN_MAX)
                r = buf_append_str(&b, ", ...");
        (void)r; /* a truncated list is still a list */
        return buf_take(&b, &len);
}

/* Where a checked name sits: path.field, or path.field[index] when index >= 0. The path
 * text is built only for a denial (most reviews pass, and building it cost more than the
 * check). */
struct name_at {
        const char *path;
        const char *field;
        long index;
};

/* A name of kind k at `at` must exist; otherwise a denial listing the known ones. */
static bool need_name(const struct maas_inventory_snapshot *s,
                      enum maas_inv_kind k,
                      struct name_at at,
                      const char *name,
                      struct field_errors *fe)
{
        bool ok =
                k == MAAS_INV_IMAGE ? maas_inv_has_image(s, name) : maas_inv_find(s, k, name) >= 0;
        struct json_path p;
        char *known;

        if (ok)
                return true;
        json_path_init(&p, at.path);
        (void)json_path_push_field(&p, at.field);
        if (at.index >= 0)
                (void)json_path_push_index(&p, (size_t)at.index);
        known = known_list(s, k);
        field_invalid_str(fe, json_path_str(&p), name, "no such %s in MAAS (known: %s)",
                          kind_words[k], known);
        free(known);
        return false;
}

/* --- machine fit ----------------------------------------------------------------------------- */

/* `in pool "p" and zone "z" with tags "a", "b"`, or "in MAAS". */
static char *scope_text(const struct maas_machine_spec *sp)
{
        struct buf b;
        size_t len;
        char *q;
        int r = 0;

        buf_init(&b, TEXT_MAX);
        if (sp->resource_pool) {
                q = field_quote(sp->resource_pool);
                r = buf_printf(&b, "in pool %s", q);
                free(q);
        }
        if (sp->failure_domain && r == 0) {
                q = field_quote(sp->failure_domain);
                r = buf_printf(&b, "%s zone %s", sp->resource_pool ? " and" : "in", q);
                free(q);
        }
        if (!sp->resource_pool && !sp->failure_domain && r == 0)
                r = buf_append_str(&b, "in MAAS");
        for (size_t i = 0; i < sp->tags.n && r == 0; i++) {
                q = field_quote(sp->tags.items[i]);
                r = buf_printf(&b, "%s%s",
                               i ? ", " : (sp->tags.n > 1 ? " with tags " : " with tag "), q);
                free(q);
        }
        return buf_take(&b, &len);
}

/* `[]string{"a", "b"}`, as Kubernetes renders a string list value. */
static char *strings_value(const struct schema_strv *v)
{
        struct buf b;
        size_t len;
        char *q;
        int r;

        buf_init(&b, TEXT_MAX);
        r = buf_append_str(&b, "[]string{");
        for (size_t i = 0; i < v->n && r == 0; i++) {
                q = field_quote(v->items[i]);
                r = buf_printf(&b, "%s%s", i ? ", " : "", q);
                free(q);
        }
        if (r == 0)
                r = buf_append_str(&b, "}");
        (void)r; /* TEXT_MAX holds any list of at most RULE_NAMES_MAX names */
        return buf_take(&b, &len);
}

/* No machine at all in that pool / zone / tag combination. */
static void deny_no_candidate(const struct maas_machine_spec *sp,
                              const char *path,
                              struct field_errors *fe)
{
        struct json_path p;
        char *scope = NULL;
        char *v;
        char *q;

        if (sp->tags.n) {
                struct maas_machine_spec no_tags = *sp;

                no_tags.tags = (struct schema_strv){ 0 };
                scope = scope_text(&no_tags);
                v = strings_value(&sp->tags);
                field_errors_add(fe, FIELD_ERR_INVALID, at(&p, path, "tags"), v,
                                 "no machine %s has all of these tags", scope);
                free(v);
        } else if (sp->failure_domain) {
                q = sp->resource_pool ? field_quote(sp->resource_pool) : NULL;
                field_invalid_str(fe, at(&p, path, "failureDomain"), sp->failure_domain,
                                  "no machine%s%s is in this zone", q ? " in pool " : "",
                                  q ? q : "");
                free(q);
        } else if (sp->resource_pool) {
                field_invalid_str(fe, at(&p, path, "resourcePool"), sp->resource_pool,
                                  "the pool has no machines");
        }
        free(scope);
}

static void warn_none_free(const struct maas_machine_spec *sp,
                           const char *path,
                           const struct maas_inv_fit *f,
                           struct admission_response *warn)
{
        char *scope = scope_text(sp);
        size_t other = f->fit - f->fit_free - f->fit_in_use;

        if (other)
                admission_response_warn(warn,
                                        "%s: %zu machine%s %s fit%s, but none is free now "
                                        "(%zu in use, %zu not ready)",
                                        path, f->fit, f->fit == 1 ? "" : "s", scope,
                                        f->fit == 1 ? "s" : "", f->fit_in_use, other);
        else
                admission_response_warn(warn,
                                        "%s: %zu machine%s %s fit%s, but none is free now "
                                        "(%zu in use)",
                                        path, f->fit, f->fit == 1 ? "" : "s", scope,
                                        f->fit == 1 ? "s" : "", f->fit_in_use);
        free(scope);
}

static void check_fit(const struct maas_inventory_snapshot *s,
                      const struct maas_machine_spec *sp,
                      const char *path,
                      struct field_errors *fe,
                      struct admission_response *warn)
{
        struct maas_inv_query q = { .pool = sp->resource_pool,
                                    .zone = sp->failure_domain,
                                    .tags = (const char *const *)sp->tags.items,
                                    .n_tags = sp->tags.n,
                                    .min_cpu = sp->has_min_cpu ? sp->min_cpu : 0,
                                    .min_memory_mib = sp->has_min_memory ? sp->min_memory : 0 };
        struct maas_inv_fit f;
        struct json_path p;
        char *scope;

        maas_inv_fit(s, &q, &f);
        if (f.candidates == 0) {
                deny_no_candidate(sp, path, fe);
                return;
        }
        if (f.fit_free > 0)
                return; /* the common case: nothing to say */
        scope = scope_text(sp);
        if (f.max_cpu < q.min_cpu)
                field_invalid_int(fe, at(&p, path, "minCPU"), q.min_cpu,
                                  "no machine %s has more than %d CPUs", scope, f.max_cpu);
        if (f.max_memory_mib < q.min_memory_mib)
                field_invalid_int(fe, at(&p, path, "minMemory"), q.min_memory_mib,
                                  "no machine %s has more than %" PRId64 " MiB of memory", scope,
                                  f.max_memory_mib);
        else if (f.max_cpu >= q.min_cpu && f.fit == 0)
                field_invalid_int(fe, at(&p, path, "minMemory"), q.min_memory_mib,
                                  "no machine %s that has at least %" PRId64
                                  " CPUs has more than %" PRId64 " MiB of memory",
                                  scope, q.min_cpu, f.max_memory_with_cpu);
        else if (f.fit > 0 && f.fit_free == 0 && warn)
                warn_none_free(sp, path, &f, warn);
        free(scope);
}

void maas_check_machine_spec(const struct maas_machine_spec *sp, struct maas_check *c)
{
        const struct maas_inventory_snapshot *s = c->s;
        const char *path = c->path;
        struct field_errors *fe = c->fe;
        bool vm = sp->lxd && sp->lxd->enabled;
        bool ok = true;

        if (sp->resource_pool)
                ok &= need_name(s, MAAS_INV_POOL, (struct name_at){ path, "resourcePool", -1 },
                                sp->resource_pool, fe);
        if (sp->failure_domain)
                ok &= need_name(s, MAAS_INV_ZONE, (struct name_at){ path, "failureDomain", -1 },
                                sp->failure_domain, fe);
        /* a VM's tags are its host's (free words in MAAS, not tag objects): validate_lxd.c */
        for (size_t i = 0; !vm && i < sp->tags.n; i++)
                ok &= need_name(s, MAAS_INV_TAG, (struct name_at){ path, "tags", (long)i },
                                sp->tags.items[i], fe);
        if (sp->image)
                ok &= need_name(s, MAAS_INV_IMAGE, (struct name_at){ path, "image", -1 }, sp->image,
                                fe);
        ok &= maas_check_static_ip(sp, c);
        ok &= maas_check_deploy_options(sp, c);
        if (!ok) {
                c->miss = true;
        } else if (vm) {
                maas_check_machine_lxd(sp, c);
        } else if (!sp->system_id) {
                size_t before = fe->n + fe->dropped;

                check_fit(s, sp, path, fe, c->warn);
                /* Machines added since the snapshot can make a template fit: a capacity
                 * denial is confirmed against a fresh read, as a missing name is. */
                if (fe->n + fe->dropped > before)
                        c->miss = true;
        }
}

void maas_check_cluster_spec(const struct maas_cluster_spec *sp, struct maas_check *c)
{
        const struct maas_inventory_snapshot *s = c->s;
        const char *path = c->path;
        struct field_errors *fe = c->fe;
        bool ok = true;

        if (sp->dns_domain)
                ok &= need_name(s, MAAS_INV_DOMAIN, (struct name_at){ path, "dnsDomain", -1 },
                                sp->dns_domain, fe);
        for (size_t i = 0; i < sp->failure_domains.n; i++)
                ok &= need_name(s, MAAS_INV_ZONE,
                                (struct name_at){ path, "failureDomains", (long)i },
                                sp->failure_domains.items[i], fe);
        if (!ok)
                c->miss = true;
        maas_check_endpoint(sp, c);
}

/* --- the flow -------------------------------------------------------------------------------- */

static const char *const skip_why[MAAS_INV_STATE_COUNT] = {
        [MAAS_INV_OK] = "no reason",
        [MAAS_INV_NOT_LOADED] = "the MAAS inventory is not loaded yet",
        [MAAS_INV_UNREACHABLE] = "MAAS is unreachable",
        [MAAS_INV_UNAUTHORIZED] = "MAAS rejected the credentials",
        [MAAS_INV_FAILED] = "the MAAS inventory could not be read",
        [MAAS_INV_STALE] = "the MAAS inventory is out of date",
};

static void skip(struct maas_inventory *inv,
                 enum maas_inv_state st,
                 const char *detail,
                 struct admission_response *resp)
{
        maas_inventory_note_skipped(inv, st);
        if (detail)
                admission_response_warn(resp, "MAAS checks skipped: %s (%s)", skip_why[st], detail);
        else
                admission_response_warn(resp, "MAAS checks skipped: %s", skip_why[st]);
}

/* A usable snapshot, after one bounded refresh when none is loaded yet; NULL after
 * skip() when there is none. */
static struct maas_inventory_snapshot *usable(struct maas_inventory *inv,
                                              bool refreshed,
                                              struct admission_response *resp)
{
        struct maas_inventory_snapshot *s;
        enum maas_inv_state st;
        char *detail = NULL;

        s = maas_inventory_acquire(inv, &st, &detail);
        if (st == MAAS_INV_NOT_LOADED && !refreshed) {
                maas_inventory_snapshot_release(s);
                free(detail);
                (void)maas_inventory_refresh_on_miss(inv);
                return usable(inv, true, resp);
        }
        if (st != MAAS_INV_OK) {
                maas_inventory_snapshot_release(s);
                skip(inv, st, detail, resp);
                s = NULL;
        }
        free(detail);
        return s;
}

static void append_errors(struct field_errors *to, struct field_errors *from)
{
        for (size_t i = 0; i < from->n; i++) {
                if (to->n == FIELD_ERRORS_MAX) {
                        to->dropped++;
                        continue;
                }
                to->items[to->n++] = from->items[i];
                from->items[i] = (struct field_error){ 0 };
        }
        from->n = 0;
}

/* Runs so's MAAS checks of the spec at path against s; true when a name was not in s. */
static bool run_checks(const struct spec_ops *so,
                       const char *path,
                       const void *spec,
                       struct maas_inventory *inv,
                       const struct maas_inventory_snapshot *s,
                       struct field_errors *fe,
                       struct admission_response *warn)
{
        struct maas_check c = { .path = path, .s = s, .fe = fe, .warn = warn };

        so->maas_check(spec, &c);
        if (c.want_pods) /* from now on the refreshes list the VM hosts */
                maas_inventory_want_pods(inv);
        return c.miss;
}

/* A name was missing from s: one bounded refresh, then the checks again on what is current
 * (NULL after skip() when the refresh failed or took too long). */
static struct maas_inventory_snapshot *recheck(const struct spec_ops *so,
                                               const char *path,
                                               const void *cur,
                                               struct maas_inventory *inv,
                                               struct maas_inventory_snapshot *s,
                                               struct field_errors *mine,
                                               struct admission_response *resp)
{
        enum maas_inv_miss m = maas_inventory_refresh_on_miss(inv);

        maas_inventory_snapshot_release(s);
        field_errors_release(mine);
        field_errors_init(mine);
        if (m == MAAS_INV_MISS_TIMEOUT) {
                skip(inv, MAAS_INV_UNREACHABLE, "no inventory refresh finished in time", resp);
                return NULL;
        }
        s = usable(inv, true, resp);
        if (s)
                (void)run_checks(so, path, cur, inv, s, mine, resp);
        return s;
}

void maas_checks_run(const struct spec_ops *so,
                     const struct spec_pair *sp,
                     struct maas_inventory *inv,
                     struct field_errors *fe,
                     struct admission_response *resp)
{
        const char *path = sp->path;
        const void *cur = sp->cur, *old = sp->old;
        struct maas_inventory_snapshot *s;
        struct field_errors mine, prev;

        if (old && so->maas_same(old, cur))
                return; /* nothing the MAAS checks read has changed */
        s = usable(inv, false, resp);
        if (!s)
                return;
        field_errors_init(&mine);
        field_errors_init(&prev);
        if (run_checks(so, path, cur, inv, s, &mine, resp))
                s = recheck(so, path, cur, inv, s, &mine, resp);
        if (s && old) {
                (void)run_checks(so, path, old, inv, s, &prev, NULL);
                field_errors_subtract(&mine, &prev);
        }
        if (s)
                append_errors(fe, &mine);
        maas_inventory_snapshot_release(s);
        field_errors_release(&prev);
        field_errors_release(&mine);
}

/* --- update comparisons ---------------------------------------------------------------------- */

static bool str_same(const char *a, const char *b)
{
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool strv_same(const struct schema_strv *a, const struct schema_strv *b)
{
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (strcmp(a->items[i], b->items[i]) != 0)
                        return false;
        return true;
}

/* The fields of spec.lxd the VM host checks read (validate_lxd.c). */
static bool maas_lxd_same(const struct maas_machine_spec *a, const struct maas_machine_spec *b)
{
        const struct maas_vm_config *va = a->lxd ? a->lxd->vm_config : NULL;
        const struct maas_vm_config *vb = b->lxd ? b->lxd->vm_config : NULL;
        bool ea = a->lxd && a->lxd->enabled, eb = b->lxd && b->lxd->enabled;

        return ea == eb && a->has_min_disk_size == b->has_min_disk_size &&
               a->min_disk_size == b->min_disk_size && !va == !vb &&
               (!va || (va->has_disk_size == vb->has_disk_size && va->disk_size == vb->disk_size &&
                        str_same(va->storage_pool, vb->storage_pool)));
}

bool maas_machine_spec_same(const struct maas_machine_spec *a, const struct maas_machine_spec *b)
{
        return str_same(a->resource_pool, b->resource_pool) &&
               str_same(a->failure_domain, b->failure_domain) && str_same(a->image, b->image) &&
               str_same(a->system_id, b->system_id) && strv_same(&a->tags, &b->tags) &&
               a->has_min_cpu == b->has_min_cpu && a->min_cpu == b->min_cpu &&
               a->has_min_memory == b->has_min_memory && a->min_memory == b->min_memory &&
               maas_static_ip_same(a, b) && str_same(a->hwe_kernel, b->hwe_kernel) &&
               str_same(a->architecture, b->architecture) &&
               strv_same(&a->exclude_tags, &b->exclude_tags) &&
               a->has_min_disk_size == b->has_min_disk_size &&
               a->min_disk_size == b->min_disk_size && maas_lxd_same(a, b);
}

bool maas_cluster_spec_same(const struct maas_cluster_spec *a, const struct maas_cluster_spec *b)
{
        return str_same(a->dns_domain, b->dns_domain) &&
               strv_same(&a->failure_domains, &b->failure_domains) && maas_endpoint_same(a, b);
}
