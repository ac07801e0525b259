/*
 * validate_maas_options: the deploy and allocation options against the MAAS inventory
 * (docs/deploy-options.md): each excludeTags name is a MAAS tag (MAAS refuses an allocate
 * naming an unknown one); the architecture is one of the boot resources' (MAAS answers
 * "Architecture not recognised." otherwise); hweKernel is among the kernels of the boot
 * resources of the image's release (a custom image's base image; MAAS refuses the deploy
 * otherwise); some machine in the pool and zone has at least minDiskSize GB of storage.
 * The storage is what MAAS reports for all of a machine's disks, so a machine whose root disk
 * is smaller still passes here and is left to the allocate: admission denies only what no
 * machine can satisfy.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "field_errors.h"
#include "json.h"
#include "maas_client.h"
#include "maas_inventory.h"
#include "validate.h"
#include "xalloc.h"

#define KNOWN_MAX 10
#define TEXT_MAX  4096

static const char *at(struct json_path *p, const char *path, const char *field)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, field);
        return json_path_str(p);
}

/* The length of the primary architecture of a ("amd64" of "amd64/generic"). */
static size_t primary_len(const char *a)
{
        return strcspn(a, "/");
}

static bool same_primary(const char *a, const char *b)
{
        size_t n = primary_len(a);

        return n == primary_len(b) && strncmp(a, b, n) == 0;
}

/* k is an element of the comma-separated list. */
static bool in_list(const char *list, const char *k)
{
        size_t n = strlen(k);

        for (const char *p = list; p && *p;) {
                const char *c = strchr(p, ',');
                size_t len = c ? (size_t)(c - p) : strlen(p);

                if (len == n && strncmp(p, k, n) == 0)
                        return true;
                p = c ? c + 1 : NULL;
        }
        return false;
}

/* The subarchitectures b offers: its own and its subarches. */
static bool offers(const struct maas_inv_boot *b, const char *sub)
{
        const char *own = strchr(b->architecture, '/');

        return (own && strcmp(own + 1, sub) == 0) || in_list(b->subarches, sub);
}

static bool arch_usable(const struct maas_inventory_snapshot *s, const char *arch)
{
        const char *sub = strchr(arch, '/');

        for (size_t i = 0; i < s->n_boots; i++)
                if (same_primary(s->boots[i].architecture, arch) &&
                    (!sub || offers(&s->boots[i], sub + 1)))
                        return true;
        return false;
}

static char *arch_list(const struct maas_inventory_snapshot *s)
{
        struct buf b;
        size_t len, n = 0;
        int r = 0;

        buf_init(&b, TEXT_MAX);
        for (size_t i = 0; i < s->n_boots && r == 0 && n < KNOWN_MAX; i++) {
                const char *a = s->boots[i].architecture;
                bool dup = false;

                for (size_t j = 0; j < i && !dup; j++)
                        dup = same_primary(s->boots[j].architecture, a);
                if (dup || !*a)
                        continue;
                r = buf_printf(&b, "%s%.*s", n++ ? ", " : "", (int)primary_len(a), a);
        }
        if (n == 0 && r == 0)
                r = buf_append_str(&b, "none");
        (void)r; /* a truncated list is still a list */
        return buf_take(&b, &len);
}

/* The boot resource name whose kernels the image deploys with: "ubuntu/jammy" for itself, a
 * custom image's base image; NULL when MAAS does not say (no kernel check then). */
static const char *kernel_release(const struct maas_inventory_snapshot *s, const char *image)
{
        char *os = NULL, *series = NULL;
        const char *rel = NULL;

        maas_split_image(image, &os, &series);
        for (size_t i = 0; i < s->n_boots && !rel; i++) {
                const struct maas_inv_boot *b = &s->boots[i];
                const char *slash = strchr(b->name, '/');
                bool custom = strcmp(os, "custom") == 0 &&
                              (strcmp(b->name, series) == 0 ||
                               (slash && strncmp(b->name, "custom/", 7) == 0 &&
                                strcmp(slash + 1, series) == 0));

                if (strcmp(b->name, image) == 0 && strcmp(os, "ubuntu") == 0)
                        rel = b->name;
                else if (custom || strcmp(b->name, image) == 0)
                        rel = b->base_image && strncmp(b->base_image, "ubuntu/", 7) == 0
                                      ? b->base_image
                                      : NULL;
        }
        free(os);
        free(series);
        return rel;
}

/* Every kernel name (with a ga or hwe part) the release's resources offer. */
static char *kernel_list(const struct maas_inventory_snapshot *s, const char *rel, const char *arch)
{
        struct buf b;
        size_t len, n = 0;
        bool more = false;
        int r = 0;

        buf_init(&b, TEXT_MAX);
        for (size_t i = 0; i < s->n_boots && r == 0; i++) {
                const struct maas_inv_boot *bt = &s->boots[i];
                const char *p = bt->subarches;

                if (strcmp(bt->name, rel) != 0 || (arch && !same_primary(bt->architecture, arch)))
                        continue;
                while (p && *p && r == 0) {
                        size_t l = strcspn(p, ",");
                        bool kernel = strncmp(p, "ga-", 3) == 0 || strncmp(p, "hwe-", 4) == 0;

                        if (kernel && n == KNOWN_MAX)
                                more = true;
                        else if (kernel)
                                r = buf_printf(&b, "%s%.*s", n++ ? ", " : "", (int)l, p);
                        p = p[l] ? p + l + 1 : NULL;
                }
        }
        if (n == 0 && r == 0)
                r = buf_append_str(&b, "none");
        if (more && r == 0)
                r = buf_append_str(&b, ", ...");
        (void)r;
        return buf_take(&b, &len);
}

static void check_kernel(const struct maas_inventory_snapshot *s,
                         const struct maas_machine_spec *sp,
                         struct maas_check *c)
{
        const char *rel = sp->image ? kernel_release(s, sp->image) : NULL;
        struct json_path p;
        char *known;

        if (!rel)
                return;
        for (size_t i = 0; i < s->n_boots; i++)
                if (strcmp(s->boots[i].name, rel) == 0 &&
                    (!sp->architecture ||
                     same_primary(s->boots[i].architecture, sp->architecture)) &&
                    offers(&s->boots[i], sp->hwe_kernel))
                        return;
        known = kernel_list(s, rel, sp->architecture);
        field_invalid_str(c->fe, at(&p, c->path, "hweKernel"), sp->hwe_kernel,
                          "no such kernel for %s in MAAS's boot resources (known: %s)", rel, known);
        free(known);
        c->miss = true;
}

static bool in_scope(const struct maas_inventory_snapshot *s,
                     const struct maas_inv_machine *m,
                     long pool,
                     long zone)
{
        (void)s;
        return (pool < 0 || m->pool == pool) && (zone < 0 || m->zone == zone);
}

static void check_disk(const struct maas_inventory_snapshot *s,
                       const struct maas_machine_spec *sp,
                       struct maas_check *c)
{
        long pool = sp->resource_pool ? maas_inv_find(s, MAAS_INV_POOL, sp->resource_pool) : -1;
        long zone = sp->failure_domain ? maas_inv_find(s, MAAS_INV_ZONE, sp->failure_domain) : -1;
        double want_mb = (double)sp->min_disk_size * 1000.0, best = 0;
        size_t n = 0;
        struct json_path p;

        if ((sp->resource_pool && pool < 0) || (sp->failure_domain && zone < 0))
                return; /* the name checks deny it */
        for (size_t i = 0; i < s->n_machines; i++) {
                const struct maas_inv_machine *m = &s->machines[i];

                if (!in_scope(s, m, pool, zone))
                        continue;
                n++;
                if (m->storage_mb > best)
                        best = m->storage_mb;
        }
        if (n == 0 || best >= want_mb)
                return; /* no machine at all: the fit check says so */
        field_invalid_int(c->fe, at(&p, c->path, "minDiskSize"), sp->min_disk_size,
                          "no machine %s has a disk that large (the most storage is %" PRId64
                          " GB)",
                          sp->resource_pool ? "in the pool" : "in MAAS", (int64_t)(best / 1000.0));
        c->miss = true;
}

bool maas_check_deploy_options(const struct maas_machine_spec *sp, struct maas_check *c)
{
        const struct maas_inventory_snapshot *s = c->s;
        struct json_path p;
        bool vm = sp->lxd && sp->lxd->enabled; /* a VM's tags and disk: validate_lxd.c */
        bool ok = true;
        char *known;

        for (size_t i = 0; !vm && i < sp->exclude_tags.n; i++) {
                if (maas_inv_find(s, MAAS_INV_TAG, sp->exclude_tags.items[i]) >= 0)
                        continue;
                json_path_init(&p, c->path);
                (void)json_path_push_field(&p, "excludeTags");
                (void)json_path_push_index(&p, i);
                field_invalid_str(c->fe, json_path_str(&p), sp->exclude_tags.items[i],
                                  "no such tag in MAAS");
                ok = false;
        }
        if (sp->architecture && !arch_usable(s, sp->architecture)) {
                known = arch_list(s);
                field_invalid_str(c->fe, at(&p, c->path, "architecture"), sp->architecture,
                                  "no boot resource in MAAS for this architecture (known: %s)",
                                  known);
                free(known);
                ok = false;
        }
        if (sp->hwe_kernel)
                check_kernel(s, sp, c);
        if (sp->has_min_disk_size && sp->min_disk_size > 0 && !sp->system_id && !vm)
                check_disk(s, sp, c);
        return ok;
}
