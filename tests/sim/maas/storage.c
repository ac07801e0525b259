/*
 * maas-sim storage: POST machines/<sid>/?op=set_storage_layout, the allocate `storage`
 * constraint and the deploy `hwe_kernel` check, as MAAS (3.x, src/maasserver) behaves:
 *  - set_storage_layout: administrators only (403); the machine must be Ready (409 "Cannot
 *    change the storage layout on a machine that is not Ready."); storage_layout required
 *    and one of MAAS's layouts (400 field map with MAAS's "is not a valid storage_layout"
 *    text); sizes as MAAS's BytesOrPercentageField reads them (400 "Enter a valid value."),
 *    boot at least 512 MiB, root and lv at least 3 GiB, none beyond the boot disk (400 "Size
 *    is too large. Maximum size is N."); cache_mode one of writeback, writethrough,
 *    writearound. The layout and its options are kept on the machine (the state dump shows
 *    them; MAAS keeps a layout across allocate and release);
 *  - storage: "label:size(tags),..." with sizes in GB (1000^3 bytes); anything the grammar
 *    does not read back is 400 'Malformed storage constraint, "<value>".'; the first
 *    constraint is the root disk (the sim's machines have one disk, the size of `storage`),
 *    each further one needs another disk, which no sim machine has; disk tags are not
 *    modelled (a constraint naming tags matches nothing);
 *  - hwe_kernel: a kernel with a "ga" or "hwe" part must be among the subarches of the boot
 *    resources of the release deployed (a custom image's base image), else 400
 *    {"hwe_kernel": ["<k> is not available for <os/release> on <arch>."]}.
 * sim.lock is held by the dispatcher.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

#define MIN_BOOT_SIZE 536870912LL  /* 512 MiB */
#define MIN_ROOT_SIZE 3221225472LL /* 3 GiB */
#define EFI_SIZE      536870912LL

static const char *const layouts[] = {
        "flat", "lvm", "bcache", "vmfs6", "vmfs7", "custom", "blank"
};
static const char *const cache_modes[] = { "writeback", "writethrough", "writearound" };

static bool one_of(const char *v, const char *const *set, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(v, set[i]) == 0)
                        return true;
        return false;
}

static void reply_bad_choice(
        struct sim_resp *rp, const char *field, const char *v, const char *const *set, size_t n)
{
        struct buf b;

        buf_init(&b, 4096);
        for (size_t i = 0; i < n; i++)
                sim_bprintf(&b, "%s'%s'", i ? ", " : "", set[i]);
        sim_reply_field_error(rp, field, "'%s' is not a valid %s.  It should be one of: %s.", v,
                              field, b.data);
        buf_release(&b);
}

/* MAAS's BytesOrPercentageField: "<digits>[KMGTPE]" (powers of 1000) or "<n>[.<n>]%". Sets
 * *ret to bytes (a percentage of disk); false when the text is not one. */
static bool parse_size(const char *v, long long disk, long long *ret)
{
        char *end = NULL;
        double pct;
        long long n, mul = 1;
        const char *p = v;

        if (!isdigit((unsigned char)*v))
                return false;
        if (strchr(v, '%')) {
                pct = strtod(v, &end);
                if (end == v || strcmp(end, "%") != 0)
                        return false;
                *ret = (long long)((double)disk * pct / 100.0);
                return true;
        }
        while (isdigit((unsigned char)*p))
                p++;
        if (*p) {
                const char *u = strchr("KkMmGgTtPpEe", *p);

                if (!u || p[1])
                        return false;
                for (long i = 0; i <= (u - "KkMmGgTtPpEe") / 2; i++)
                        mul *= 1000;
        }
        n = strtoll(v, NULL, 10);
        *ret = n * mul;
        return true;
}

static bool check_size(const struct sim_params *p,
                       const char *field,
                       long long min,
                       long long max,
                       long long disk,
                       struct sim_resp *rp)
{
        const char *v = sim_params_get(p, field);
        long long n = 0;

        if (!v || !*v)
                return true;
        if (!parse_size(v, disk, &n)) {
                sim_reply_field_error(rp, field, "Enter a valid value.");
                return false;
        }
        if (n < min) {
                sim_reply_field_error(rp, field, "Size is too small. Minimum size is %lld.", min);
                return false;
        }
        if (n > max) {
                sim_reply_field_error(rp, field, "Size is too large. Maximum size is %lld.", max);
                return false;
        }
        return true;
}

static bool check_layout(const struct sim_params *p, long long disk, struct sim_resp *rp)
{
        const char *layout = sim_params_get(p, "storage_layout");
        const char *mode = sim_params_get(p, "cache_mode");
        long long room = disk - EFI_SIZE;

        if (!layout || !*layout) {
                sim_reply_field_error(rp, "storage_layout", "This field is required.");
                return false;
        }
        if (!one_of(layout, layouts, ARRAY_SIZE(layouts))) {
                reply_bad_choice(rp, "storage_layout", layout, layouts, ARRAY_SIZE(layouts));
                return false;
        }
        if (mode && *mode && strcmp(layout, "bcache") == 0 &&
            !one_of(mode, cache_modes, ARRAY_SIZE(cache_modes))) {
                sim_reply_field_error(rp, "cache_mode",
                                      "Select a valid choice. %s is not one of the available "
                                      "choices.",
                                      mode);
                return false;
        }
        return check_size(p, "boot_size", MIN_BOOT_SIZE, room - MIN_ROOT_SIZE, room, rp) &&
               check_size(p, "root_size", MIN_ROOT_SIZE, room - MIN_BOOT_SIZE, room, rp) &&
               (strcmp(layout, "lvm") != 0 ||
                check_size(p, "lv_size", MIN_ROOT_SIZE, room, room, rp));
}

/* "storage_layout=lvm root_size=24G ..." as the request gave them, for the state dump. */
static char *layout_text(const struct sim_params *p)
{
        static const char *const keys[] = { "storage_layout", "boot_size",  "root_size",
                                            "vg_name",        "lv_name",    "lv_size",
                                            "cache_mode",     "cache_size", "cache_no_part" };
        struct buf b;
        char *out;

        buf_init(&b, 4096);
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                const char *v = sim_params_get(p, keys[i]);

                if (v)
                        sim_bprintf(&b, "%s%s=%s", b.len ? " " : "", keys[i], v);
        }
        out = xstrdup(b.data ? b.data : "");
        buf_release(&b);
        return out;
}

void sim_machine_set_storage_layout(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = sim_find_machine(s, rq->arg);

        if (!m) {
                sim_reply_text(rp, 404, "No Machine matches the given query.");
                return;
        }
        if (!rq->user || strcmp(rq->user, "admin") != 0) {
                sim_reply_text(rp, 403,
                               "You do not have permission to set the storage layout "
                               "of this machine.");
                return;
        }
        sim_machine_tick(s, m);
        if (m->status != ST_READY) {
                sim_reply_text(rp, 409,
                               "Cannot change the storage layout on a machine that is not Ready.");
                return;
        }
        if (!check_layout(&rq->form, (long long)(m->storage * 1e6), rp))
                return;
        free(m->storage_layout);
        m->storage_layout = layout_text(&rq->form);
        sim_reply_json(rp, sim_machine_json(s, m));
}

/* --- the allocate storage constraint ------------------------------------------------------- */

/* One "label:size(tags)" at *pp; advances past it. */
static bool storage_one(const char **pp, double *ret_gb, bool *ret_tags)
{
        const char *p = *pp, *q;
        char *end = NULL;

        for (q = p; isalnum((unsigned char)*q); q++)
                ;
        if (*q == ':' && q > p)
                p = q + 1;
        if (!isdigit((unsigned char)*p) && *p != '.')
                return false;
        *ret_gb = strtod(p, &end);
        if (end == p)
                return false;
        p = end;
        *ret_tags = false;
        if (*p == '(') {
                q = strchr(p, ')');
                if (!q || q == p + 1)
                        return false;
                *ret_tags = true;
                p = q + 1;
        }
        *pp = p;
        return true;
}

bool sim_storage_parse(const char *v, double *ret_root_gb, size_t *ret_n, bool *ret_tags)
{
        const char *p = v;
        bool tags = false;

        *ret_n = 0;
        *ret_tags = false;
        while (*p) {
                double gb;

                if (!storage_one(&p, &gb, &tags))
                        return false;
                if (*ret_n == 0)
                        *ret_root_gb = gb;
                *ret_tags = *ret_tags || tags;
                (*ret_n)++;
                if (*p == ',' && p[1])
                        p++;
                else if (*p)
                        return false;
        }
        return *ret_n > 0;
}

bool sim_storage_fits(const struct sim_machine *m, double root_gb, size_t n, bool tags)
{
        return n == 1 && !tags && m->storage * 1e6 >= root_gb * 1e9;
}

/* --- the deploy hwe_kernel check ------------------------------------------------------------ */

/* MAAS's validate_kernel_str: some '-'-separated part is "hwe" or "ga". */
static bool kernel_str(const char *k)
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

bool sim_kernel_ok(const struct sim *s,
                   const struct sim_machine *m,
                   const char *os,
                   const char *rel,
                   const char *kernel,
                   struct sim_resp *rp)
{
        char *name = xasprintf("%s/%s", os, rel);
        const char *base = NULL;
        size_t alen = strcspn(m->architecture, "/");
        bool ok = false;

        if (!kernel || !*kernel || !kernel_str(kernel)) {
                free(name);
                return true;
        }
        for (size_t i = 0; i < s->n_boots; i++)
                if (s->boots[i].base_image && strcmp(s->boots[i].name, rel) == 0)
                        base = s->boots[i].base_image;
        if (base) {
                free(name);
                name = xstrdup(base);
        }
        for (size_t i = 0; i < s->n_boots && !ok; i++) {
                const struct sim_boot *b = &s->boots[i];

                ok = strcmp(b->name, name) == 0 &&
                     strncmp(b->architecture, m->architecture, alen) == 0 &&
                     (in_list(b->subarches, kernel) ||
                      strcmp(strchr(b->architecture, '/') ? strchr(b->architecture, '/') + 1 : "",
                             kernel) == 0);
        }
        if (!ok)
                sim_reply_field_error(rp, "hwe_kernel", "%s is not available for %s on %s.", kernel,
                                      name, m->architecture);
        free(name);
        return ok;
}
