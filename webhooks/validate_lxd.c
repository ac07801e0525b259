/*
 * validate_lxd: spec.lxd of MaasMachine and MaasMachineTemplate (docs/lxd.md). Value rules:
 * vmConfig.diskSize at least 1, storagePool a MAAS name, minMemory at least 1024 MiB when
 * set (MAAS composes no smaller VM), and the fields capmaas does not implement denied rather
 * than ignored: vmConfig.network, vmConfig.interfaceLinkModes, vmConfig.autoStart false.
 * MAAS checks (with the inventory's VM hosts): some VM host in the pool and zone carries
 * every tag (denied otherwise, as a pool without machines is), some could ever hold the VM
 * with its over-commit (denied otherwise, naming the closest and what it lacks), and a
 * warning when none has the room free now. A MAAS without VM hosts (3.8 removed them) is
 * denied.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "buf.h"
#include "field_errors.h"
#include "json.h"
#include "maas_inventory.h"
#include "maas_pods.h"
#include "validate.h"
#include "validate_rules.h"
#include "xalloc.h"

#define VM_MEMORY_MIN   1024 /* MiB: MAAS's ComposeMachineForm minimum */
#define DEFAULT_DISK_GB 60
#define DEFAULT_MEM_MIB 2048
#define HOSTS_LISTED    10

static const struct rule_bounds vm_disk_size = { 1, INT64_MAX, false };

static const char *at(struct json_path *p, const char *path, const char *field)
{
        json_path_init(p, path);
        (void)json_path_push_field(p, field);
        return json_path_str(p);
}

static bool vm_enabled(const struct maas_machine_spec *s)
{
        return s->lxd && s->lxd->enabled;
}

void validate_machine_lxd(const struct maas_machine_spec *s,
                          const char *path,
                          struct field_errors *fe)
{
        const struct maas_vm_config *vc = s->lxd ? s->lxd->vm_config : NULL;
        struct json_path p;

        if (vc) {
                rule_range(fe, at(&p, path, "lxd.vmConfig.diskSize"), vc->has_disk_size,
                           vc->disk_size, &vm_disk_size);
                rule_maas_name(fe, at(&p, path, "lxd.vmConfig.storagePool"), vc->storage_pool);
                if (vc->network)
                        field_errors_add(fe, FIELD_ERR_FORBIDDEN,
                                         at(&p, path, "lxd.vmConfig.network"), NULL,
                                         "not supported: capmaas composes VMs on the VM host's "
                                         "default network");
                if (vc->interface_link_modes.n)
                        field_errors_add(fe, FIELD_ERR_FORBIDDEN,
                                         at(&p, path, "lxd.vmConfig.interfaceLinkModes"), NULL,
                                         "not supported: the VM's interfaces are configured as "
                                         "MAAS commissions them");
                if (vc->has_auto_start && !vc->auto_start)
                        field_errors_add(fe, FIELD_ERR_FORBIDDEN,
                                         at(&p, path, "lxd.vmConfig.autoStart"), "false",
                                         "not supported: MAAS starts a composed VM to "
                                         "commission and deploy it");
        }
        if (vm_enabled(s) && s->has_min_memory && s->min_memory > 0 &&
            s->min_memory < VM_MEMORY_MIN)
                field_invalid_int(fe, at(&p, path, "minMemory"), s->min_memory,
                                  "MAAS composes VMs of at least %d MiB", VM_MEMORY_MIN);
}

/* --- against MAAS's VM hosts ------------------------------------------------------------------ */

static void vm_request(const struct maas_machine_spec *s, struct maas_vm_request *rq)
{
        const struct maas_vm_config *vc = s->lxd ? s->lxd->vm_config : NULL;
        int64_t disk = vc && vc->has_disk_size ? vc->disk_size : DEFAULT_DISK_GB;

        if (s->has_min_disk_size && s->min_disk_size > disk)
                disk = s->min_disk_size;
        *rq = (struct maas_vm_request){
                .cores = s->has_min_cpu && s->min_cpu > 0 ? s->min_cpu : 1,
                .memory_mib =
                        s->has_min_memory && s->min_memory > 0 ? s->min_memory : DEFAULT_MEM_MIB,
                .disk_gb = disk > 0 ? disk : DEFAULT_DISK_GB,
                .zone = s->failure_domain,
                .pool = s->resource_pool,
                .tags = (const char *const *)s->tags.items,
                .n_tags = s->tags.n,
                .not_tags = (const char *const *)s->exclude_tags.items,
                .n_not_tags = s->exclude_tags.n,
                .arch = s->architecture,
                .host_system_id = s->parent,
                .storage_pool = vc ? vc->storage_pool : NULL,
        };
}

/* "lxd-a (pool capi, zone az1, tags virtual), ..." or "none". */
static char *hosts_text(const struct maas_pod_list *l)
{
        struct buf b;
        size_t len;
        int r = 0;

        if (!l->n)
                return xstrdup("none");
        buf_init(&b, 4096);
        for (size_t i = 0; i < l->n && i < HOSTS_LISTED && r == 0; i++) {
                const struct maas_pod *h = &l->items[i];

                r = buf_printf(&b, "%s%s (pool %s, zone %s", i ? ", " : "", h->name,
                               h->pool ? h->pool : "-", h->zone ? h->zone : "-");
                for (size_t t = 0; t < h->tags.n && r == 0; t++)
                        r = buf_printf(&b, "%s%s", t ? "," : ", tags ", h->tags.v[t]);
                if (r == 0)
                        r = buf_append_str(&b, ")");
        }
        if (r == 0 && l->n > HOSTS_LISTED)
                r = buf_append_str(&b, ", ...");
        (void)r; /* a truncated list is still a list */
        return buf_take(&b, &len);
}

/* " in pool p, in zone z, with tags a,b, without tags c, for architecture x, on machine m",
 * what the request asks of a host; "" when nothing. */
static char *asked_text(const struct maas_vm_request *rq)
{
        struct buf b;
        size_t len;
        int r = 0;

        buf_init(&b, 4096);
        if (rq->pool)
                r = buf_printf(&b, " in pool %s", rq->pool);
        if (rq->zone && r == 0)
                r = buf_printf(&b, "%s in zone %s", b.len ? "," : "", rq->zone);
        for (size_t i = 0; i < rq->n_tags && r == 0; i++)
                r = buf_printf(&b, "%s%s", i ? "," : (b.len ? ", with tags " : " with tags "),
                               rq->tags[i]);
        for (size_t i = 0; i < rq->n_not_tags && r == 0; i++)
                r = buf_printf(&b, "%s%s", i ? "," : (b.len ? ", without tags " : " without tags "),
                               rq->not_tags[i]);
        if (rq->arch && r == 0)
                r = buf_printf(&b, "%s for architecture %s", b.len ? "," : "", rq->arch);
        if (rq->host_system_id && r == 0)
                r = buf_printf(&b, "%s on machine %s", b.len ? "," : "", rq->host_system_id);
        (void)r; /* a truncated text is still a text */
        return buf_take(&b, &len);
}

/* The hosts as if empty: what could ever be composed there. */
static void emptied(const struct maas_pod_list *src, struct maas_pod_list *ret)
{
        maas_pod_list_copy(src, ret);
        for (size_t i = 0; i < ret->n; i++) {
                ret->items[i].cores_used = 0;
                ret->items[i].memory_used = 0;
                for (size_t k = 0; k < ret->items[i].n_storage_pools; k++)
                        ret->items[i].storage_pools[k].used = 0;
        }
}

/* The field the VM lacks most by, and its value as the request has it. */
static const char *lacking_field(unsigned lacks, const struct maas_vm_request *rq, int64_t *ret)
{
        if (lacks & MAAS_POD_LACKS_CORES) {
                *ret = rq->cores;
                return "minCPU";
        }
        if (lacks & MAAS_POD_LACKS_MEMORY) {
                *ret = rq->memory_mib;
                return "minMemory";
        }
        *ret = rq->disk_gb;
        return "lxd.vmConfig.diskSize";
}

static void check_hosts(const struct maas_machine_spec *s,
                        const struct maas_pod_list *hosts,
                        struct maas_check *c)
{
        struct maas_vm_request rq;
        struct maas_pod_choice now, ever;
        struct maas_pod_list empty;
        struct json_path p;
        const char *field;
        int64_t value;
        char *text;

        vm_request(s, &rq);
        maas_pod_choose(hosts, &rq, &now);
        if (now.candidates == 0) {
                char *asked = asked_text(&rq);

                text = hosts_text(hosts);
                field_errors_add(c->fe, FIELD_ERR_INVALID, at(&p, c->path, "lxd.enabled"), "true",
                                 "no MAAS VM host%s (VM hosts: %s)", asked, text);
                free(asked);
                free(text);
                c->miss = true; /* a host registered since the snapshot: a fresh read decides */
                return;
        }
        if (now.chosen >= 0)
                return; /* the common case */
        emptied(hosts, &empty);
        maas_pod_choose(&empty, &rq, &ever);
        if (ever.chosen < 0) {
                text = maas_pod_lacks_text(&ever, &rq);
                field = lacking_field(ever.lacks, &rq, &value);
                field_invalid_int(c->fe, at(&p, c->path, field), value,
                                  "no MAAS VM host could ever compose this VM: the largest "
                                  "candidate, %s, lacks %s even when empty",
                                  empty.items[ever.closest].name, text);
                free(text);
                c->miss = true;
        } else if (c->warn) {
                text = maas_pod_lacks_text(&now, &rq);
                admission_response_warn(c->warn,
                                        "%s: no MAAS VM host has room for this VM now: the "
                                        "closest, %s, lacks %s",
                                        c->path, hosts->items[now.closest].name, text);
                free(text);
        }
        maas_pod_list_release(&empty);
}

void maas_check_machine_lxd(const struct maas_machine_spec *s, struct maas_check *c)
{
        const struct maas_inventory_snapshot *snap = c->s;
        struct json_path p;

        if (!vm_enabled(s))
                return;
        switch (snap->pods_state) {
        case MAAS_INV_PODS_UNKNOWN: /* not listed yet: ask for them, and a fresh read */
                c->want_pods = true;
                c->miss = true;
                return;
        case MAAS_INV_PODS_FAILED:
                if (c->warn)
                        admission_response_warn(c->warn,
                                                "%s.lxd: MAAS's VM hosts could not be listed; "
                                                "not checked",
                                                c->path);
                return;
        case MAAS_INV_PODS_NONE:
                field_errors_add(c->fe, FIELD_ERR_INVALID, at(&p, c->path, "lxd.enabled"), "true",
                                 "this MAAS has no VM hosts (MAAS 3.8 removed them)");
                return;
        case MAAS_INV_PODS_OK:
                check_hosts(s, &snap->pods, c);
                return;
        }
}
