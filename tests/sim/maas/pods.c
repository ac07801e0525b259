/*
 * maas-sim VM hosts ("pods", MAAS 2.5 to 3.7): the list and one host as MAAS shows them, and
 * compose with MAAS's checks and refusals (src/maasserver/forms/pods.py, models/bmc.py, the
 * LXD pod driver): cores at least 1, memory at least 1024 MiB, an architecture of the host's
 * (amd64/generic), a unique hostname (400 field errors); then the over-commit check (used +
 * requested <= total * ratio, else 503 "Unable to compose KVM instance in '<host>'. CPU overcommit
 * ratio is ..."), then the storage pool (the one the storage constraint's tag names, else the
 * default; used + size <= total, else 503 "Unable to compose machine because: Not enough ..."). A
 * composed machine is New-then- Commissioning (unowned, power on) and Ready after
 * --commission-seconds (sim.h), in the host's pool and the zone asked for (MAAS's default zone when
 * none); DELETE machines/<id>/ deletes it and frees its share of the host (machines.c). The fault
 * "compose_delay_ms" answers a compose late, the VM already existing (a client killed meanwhile
 * never learns its system id). Lock held in every handler.
 *
 * Inventory ("vm_hosts"):
 *   [{name (required), type (lxd), zone, pool, tags: [..], cores, memory (MiB),
 *     cpu_over_commit_ratio, memory_over_commit_ratio, host (a machine's system_id),
 *     storage_pools: [{name, type, size_gb, default}]}]   (no pools: "default", 500 GB)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

#define GB 1000000000.0

static const char *jstr(const cJSON *o, const char *k, const char *dflt)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsString(v) ? v->valuestring : dflt;
}

static double jnum(const cJSON *o, const char *k, double dflt)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        if (cJSON_IsNumber(v))
                return v->valuedouble;
        if (cJSON_IsString(v))
                return strtod(v->valuestring, NULL);
        return dflt;
}

/* --- inventory ------------------------------------------------------------------------------ */

static void add_storage(struct sim_pod *p, const char *name, const char *type, double gb, bool d)
{
        p->storage = xrealloc(p->storage, (p->n_storage + 1) * sizeof(*p->storage));
        p->storage[p->n_storage++] = (struct sim_storage_pool){
                .name = xstrdup(name),
                .type = xstrdup(type),
                .total = (int64_t)(gb * GB),
                .is_default = d,
        };
}

int sim_add_pod_json(struct sim *s, const cJSON *o, char **ret_err)
{
        const char *name = jstr(o, "name", NULL);
        ssize_t zi = sim_find_zone(s, jstr(o, "zone", "default"));
        ssize_t pi = sim_find_pool(s, jstr(o, "pool", "default"));
        const cJSON *e, *tags = cJSON_GetObjectItemCaseSensitive(o, "tags");
        struct sim_pod p = { 0 };
        bool have_default = false;

        if (!name || !*name || zi < 0 || pi < 0) {
                *ret_err = xasprintf("vm_hosts: %s: a name, and a zone and pool that exist",
                                     name ? name : "(no name)");
                return CM_EINVAL;
        }
        p = (struct sim_pod){
                .id = (int)s->n_pods + 1,
                .name = xstrdup(name),
                .type = xstrdup(jstr(o, "type", "lxd")),
                .zone = (size_t)zi,
                .pool = (size_t)pi,
                .cores = (int)jnum(o, "cores", 8),
                .memory = (int64_t)jnum(o, "memory", 16384),
                .cpu_ratio = jnum(o, "cpu_over_commit_ratio", 1.0),
                .memory_ratio = jnum(o, "memory_over_commit_ratio", 1.0),
                .host = jstr(o, "host", NULL) ? xstrdup(jstr(o, "host", NULL)) : NULL,
        };
        cJSON_ArrayForEach (e, tags)
                if (cJSON_IsString(e))
                        sim_strv_add(&p.tags, e->valuestring);
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(o, "storage_pools")) {
                bool d = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "default"));

                add_storage(&p, jstr(e, "name", "default"), jstr(e, "type", "zfs"),
                            jnum(e, "size_gb", 500), d && !have_default);
                have_default = have_default || d;
        }
        if (!p.n_storage)
                add_storage(&p, "default", "zfs", 500, true);
        else if (!have_default)
                p.storage[0].is_default = true;
        s->pods = xrealloc(s->pods, (s->n_pods + 1) * sizeof(*s->pods));
        s->pods[s->n_pods++] = p;
        return 0;
}

void sim_pods_release(struct sim *s)
{
        for (size_t i = 0; i < s->n_pods; i++) {
                struct sim_pod *p = &s->pods[i];

                free(p->name);
                free(p->type);
                free(p->host);
                sim_strv_release(&p->tags);
                for (size_t k = 0; k < p->n_storage; k++) {
                        free(p->storage[k].name);
                        free(p->storage[k].type);
                }
                free(p->storage);
        }
        free(s->pods);
        s->pods = NULL;
        s->n_pods = 0;
}

/* --- what a host's VMs use -------------------------------------------------------------------- */

struct used {
        int64_t cores, memory;
        int64_t *storage; /* per storage pool, bytes (owned) */
};

static void used_of(const struct sim *s, const struct sim_pod *p, struct used *u)
{
        *u = (struct used){ .storage = xcalloc(p->n_storage + 1, sizeof(int64_t)) };
        for (size_t i = 0; i < s->n_machines; i++) {
                const struct sim_machine *m = &s->machines[i];

                if (m->pod_id != p->id)
                        continue;
                u->cores += m->cpu_count;
                u->memory += m->memory;
                if (m->pod_storage < p->n_storage)
                        u->storage[m->pod_storage] += m->pod_disk;
        }
}

static cJSON *named(const char *name, int id, const char *kind)
{
        cJSON *o = cJSON_CreateObject();
        char *uri = xasprintf("/MAAS/api/2.0/%s/%d/", kind, id);

        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "description", "");
        cJSON_AddNumberToObject(o, "id", id);
        cJSON_AddStringToObject(o, "resource_uri", uri);
        free(uri);
        return o;
}

static cJSON *resources(int64_t cores, int64_t memory, int64_t storage)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddNumberToObject(o, "cores", (double)cores);
        cJSON_AddNumberToObject(o, "memory", (double)memory);
        cJSON_AddNumberToObject(o, "local_storage", (double)storage);
        return o;
}

static cJSON *pod_json(struct sim *s, const struct sim_pod *p)
{
        cJSON *o = cJSON_CreateObject(), *sp = cJSON_CreateArray(), *tags = cJSON_CreateArray();
        cJSON *host = cJSON_CreateObject();
        int64_t total_storage = 0, used_storage = 0;
        struct used u;
        char *uri = xasprintf("/MAAS/api/2.0/vm-hosts/%d/", p->id);

        used_of(s, p, &u);
        for (size_t k = 0; k < p->n_storage; k++) {
                cJSON *e = cJSON_CreateObject();
                char *path =
                        xasprintf("/var/snap/lxd/common/lxd/storage-pools/%s", p->storage[k].name);

                cJSON_AddStringToObject(e, "id", p->storage[k].name);
                cJSON_AddStringToObject(e, "name", p->storage[k].name);
                cJSON_AddStringToObject(e, "type", p->storage[k].type);
                cJSON_AddStringToObject(e, "path", path);
                cJSON_AddNumberToObject(e, "total", (double)p->storage[k].total);
                cJSON_AddNumberToObject(e, "used", (double)u.storage[k]);
                cJSON_AddNumberToObject(e, "available",
                                        (double)(p->storage[k].total - u.storage[k]));
                cJSON_AddBoolToObject(e, "default", p->storage[k].is_default);
                cJSON_AddItemToArray(sp, e);
                total_storage += p->storage[k].total;
                used_storage += u.storage[k];
                free(path);
        }
        for (size_t i = 0; i < p->tags.n; i++)
                cJSON_AddItemToArray(tags, cJSON_CreateString(p->tags.v[i]));
        if (p->host)
                cJSON_AddStringToObject(host, "system_id", p->host);
        else
                cJSON_AddNullToObject(host, "system_id");
        cJSON_AddNumberToObject(o, "id", p->id);
        cJSON_AddStringToObject(o, "name", p->name);
        cJSON_AddStringToObject(o, "type", p->type);
        cJSON_AddItemToObject(o, "architectures", cJSON_CreateArray());
        cJSON_AddItemToArray(cJSON_GetObjectItem(o, "architectures"),
                             cJSON_CreateString("amd64/generic"));
        cJSON_AddItemToObject(o, "capabilities", cJSON_CreateArray());
        cJSON_AddItemToArray(cJSON_GetObjectItem(o, "capabilities"),
                             cJSON_CreateString("composable"));
        cJSON_AddItemToArray(cJSON_GetObjectItem(o, "capabilities"),
                             cJSON_CreateString("over_commit"));
        cJSON_AddItemToObject(o, "zone",
                              named(s->zones[p->zone].name, s->zones[p->zone].id, "zones"));
        cJSON_AddItemToObject(o, "pool",
                              named(s->pools[p->pool].name, s->pools[p->pool].id, "resourcepool"));
        cJSON_AddItemToObject(o, "tags", tags);
        cJSON_AddItemToObject(o, "host", host);
        cJSON_AddNumberToObject(o, "cpu_over_commit_ratio", p->cpu_ratio);
        cJSON_AddNumberToObject(o, "memory_over_commit_ratio", p->memory_ratio);
        cJSON_AddItemToObject(o, "total", resources(p->cores, p->memory, total_storage));
        cJSON_AddItemToObject(o, "used", resources(u.cores, u.memory, used_storage));
        cJSON_AddItemToObject(
                o, "available",
                resources(p->cores - u.cores, p->memory - u.memory, total_storage - used_storage));
        cJSON_AddItemToObject(o, "storage_pools", sp);
        cJSON_AddStringToObject(o, "resource_uri", uri);
        free(uri);
        free(u.storage);
        return o;
}

cJSON *sim_pods_json(struct sim *s)
{
        cJSON *arr = cJSON_CreateArray();

        for (size_t i = 0; i < s->n_pods; i++) {
                cJSON *o = pod_json(s, &s->pods[i]);
                cJSON *vms = cJSON_AddArrayToObject(o, "machines");

                for (size_t k = 0; k < s->n_machines; k++)
                        if (s->machines[k].pod_id == s->pods[i].id)
                                cJSON_AddItemToArray(vms,
                                                     cJSON_CreateString(s->machines[k].system_id));
                cJSON_AddItemToArray(arr, o);
        }
        return arr;
}

/* --- handlers ------------------------------------------------------------------------------------
 */

static struct sim_pod *get_pod(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        char *end = NULL;
        long id = rq->arg ? strtol(rq->arg, &end, 10) : 0;

        for (size_t i = 0; end && !*end && i < s->n_pods; i++)
                if (s->pods[i].id == id)
                        return &s->pods[i];
        sim_reply_text(rp, 404, "No Pod matches the given query.");
        return NULL;
}

static void pods_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        cJSON *arr = cJSON_CreateArray();

        (void)rq;
        for (size_t i = 0; i < s->n_pods; i++)
                cJSON_AddItemToArray(arr, pod_json(s, &s->pods[i]));
        sim_reply_json(rp, arr);
}

static void pod_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_pod *p = get_pod(s, rq, rp);

        if (p)
                sim_reply_json(rp, pod_json(s, p));
}

/* A Django IntegerField: absent = dflt; not a whole number or below min = a 400. */
static bool int_field(const struct sim_req *rq,
                      const char *k,
                      long dflt,
                      long min,
                      long *ret,
                      struct sim_resp *rp)
{
        const char *v = sim_params_get(&rq->form, k);
        char *end = NULL;
        long n;

        if (!v || !*v) {
                *ret = dflt;
                return true;
        }
        n = strtol(v, &end, 10);
        if (!end || *end) {
                sim_reply_field_error(rp, k, "Enter a whole number.");
                return false;
        }
        if (n < min) {
                sim_reply_field_error(rp, k, "Ensure this value is greater than or equal to %ld.",
                                      min);
                return false;
        }
        *ret = n;
        return true;
}

/* "label:size(tag,...)" (the first constraint only: the root disk); size in GB. */
static bool storage_field(const struct sim_req *rq,
                          double *ret_gb,
                          char **ret_pool,
                          struct sim_resp *rp)
{
        const char *v = sim_params_get(&rq->form, "storage");
        const char *colon, *paren;
        char *end = NULL;

        *ret_gb = 8; /* MAAS's DEFAULT_COMPOSED_STORAGE */
        *ret_pool = NULL;
        if (!v || !*v)
                return true;
        colon = strchr(v, ':');
        if (colon)
                *ret_gb = strtod(colon + 1, &end);
        if (!colon || end == colon + 1 || *ret_gb <= 0 || (*end && *end != '(' && *end != ',')) {
                sim_reply_field_error(rp, "storage", "Malformed storage constraint, \"%s\".", v);
                return false;
        }
        paren = *end == '(' ? end + 1 : NULL;
        if (paren) {
                size_t n = strcspn(paren, ",)");

                if (paren[n] == '\0') {
                        sim_reply_field_error(rp, "storage",
                                              "Malformed storage constraint, \"%s\".", v);
                        return false;
                }
                *ret_pool = xstrndup(paren, n);
        }
        return true;
}

static bool hostname_free(const struct sim *s, const char *h)
{
        for (size_t i = 0; i < s->n_machines; i++)
                if (strcasecmp(s->machines[i].hostname, h) == 0)
                        return false;
        return true;
}

/* MAAS's check_over_commit_ratios message, or NULL (new string). */
static char *over_commit(const struct sim_pod *p, const struct used *u, long cores, long mem)
{
        struct buf b;
        char *out;

        buf_init(&b, 1024);
        if ((double)p->cores * p->cpu_ratio - (double)(u->cores + cores) < 0)
                sim_bprintf(&b,
                            "CPU overcommit ratio is %g and there are %lld available resources; "
                            "%ld requested.",
                            p->cpu_ratio, (long long)(p->cores - u->cores), cores);
        if ((double)p->memory * p->memory_ratio - (double)(u->memory + mem) < 0)
                sim_bprintf(&b,
                            "Memory overcommit ratio is %g and there are %lld available "
                            "resources; %ld requested.",
                            p->memory_ratio, (long long)(p->memory - u->memory), mem);
        out = b.len ? xstrndup(b.data, b.len) : NULL;
        buf_release(&b);
        return out;
}

/* The storage pool the disk goes to, or -1 with the 503 answered. */
static ssize_t storage_pool_for(const struct sim_pod *p,
                                const struct used *u,
                                const char *want,
                                int64_t bytes,
                                struct sim_resp *rp)
{
        for (size_t k = 0; k < p->n_storage; k++) {
                if (want ? strcmp(p->storage[k].name, want) != 0 : !p->storage[k].is_default)
                        continue;
                if (u->storage[k] + bytes <= p->storage[k].total)
                        return (ssize_t)k;
                sim_reply_text(rp, 503,
                               want ? "Unable to compose machine because: Not enough storage "
                                      "space on storage pools: %s"
                                    : "Unable to compose machine because: Not enough space in "
                                      "default storage pool: %s",
                               p->storage[k].name);
                return -1;
        }
        if (want)
                sim_reply_text(rp, 503,
                               "Unable to compose machine because: Not enough storage space on "
                               "storage pools: %s",
                               want);
        else
                sim_reply_text(rp, 503,
                               "Unable to compose machine because: No storage pools "
                               "exists.  Please create a storage pool in LXD.");
        return -1;
}

static bool id_choice(const struct sim_req *rq,
                      const char *k,
                      size_t n,
                      const int *ids,
                      ssize_t dflt,
                      ssize_t *ret,
                      struct sim_resp *rp)
{
        const char *v = sim_params_get(&rq->form, k);
        char *end = NULL;
        long id;

        *ret = dflt;
        if (!v || !*v)
                return true;
        id = strtol(v, &end, 10);
        for (size_t i = 0; end && !*end && i < n; i++)
                if (ids[i] == id) {
                        *ret = (ssize_t)i;
                        return true;
                }
        sim_reply_field_error(rp, k,
                              "Select a valid choice. That choice is not one of the available "
                              "choices.");
        return false;
}

static char *new_vm_id(struct sim *s)
{
        char *sid = NULL;

        do {
                free(sid);
                sid = xasprintf("vm%04x", ++s->next_vm & 0xffff);
        } while (sim_find_machine(s, sid));
        return sid;
}

/* Adds the VM through the inventory's builder (ids, interfaces, links), then marks it. */
static struct sim_machine *create_vm(struct sim *s,
                                     const struct sim_pod *p,
                                     const char *hostname,
                                     long cores,
                                     long mem,
                                     size_t zone,
                                     size_t pool,
                                     size_t sp,
                                     int64_t bytes)
{
        cJSON *o = cJSON_CreateObject();
        char *sid = new_vm_id(s), *err = NULL;
        struct sim_machine *m = NULL;

        cJSON_AddStringToObject(o, "system_id", sid);
        cJSON_AddStringToObject(o, "hostname", hostname);
        cJSON_AddNumberToObject(o, "cpu_count", (double)cores);
        cJSON_AddNumberToObject(o, "memory", (double)mem);
        cJSON_AddNumberToObject(o, "storage", (double)bytes / 1e6);
        cJSON_AddStringToObject(o, "zone", s->zones[zone].name);
        cJSON_AddStringToObject(o, "pool", s->pools[pool].name);
        cJSON_AddStringToObject(o, "power_type", "lxd");
        cJSON_AddStringToObject(o, "power_state", "on");
        cJSON_AddStringToObject(o, "status", "Commissioning");
        cJSON_AddStringToObject(o, "description", p->name);
        if (sim_add_machine_json(s, o, &err) == 0) {
                m = sim_find_machine(s, sid);
                m->pod_id = p->id;
                m->pod_storage = sp;
                m->pod_disk = bytes;
                m->deadline = sim_now() + s->commission_seconds;
                free(m->status_message);
                m->status_message = xstrdup("Commissioning");
        }
        free(err);
        free(sid);
        cJSON_Delete(o);
        return m;
}

static void pod_compose(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_pod *p = get_pod(s, rq, rp);
        const char *hostname = sim_params_get(&rq->form, "hostname"), *arch;
        long cores, mem;
        double gb;
        char *want = NULL, *oc = NULL;
        ssize_t zone, pool, sp;
        struct used u = { 0 };
        struct sim_machine *m;
        int zone_ids[64], pool_ids[64];
        cJSON *doc;

        if (!p)
                return;
        for (size_t i = 0; i < s->n_zones && i < 64; i++)
                zone_ids[i] = s->zones[i].id;
        for (size_t i = 0; i < s->n_pools && i < 64; i++)
                pool_ids[i] = s->pools[i].id;
        if (!int_field(rq, "cores", 1, 1, &cores, rp) ||
            !int_field(rq, "memory", 2048, 1024, &mem, rp) || !storage_field(rq, &gb, &want, rp) ||
            !id_choice(rq, "zone", s->n_zones < 64 ? s->n_zones : 64, zone_ids,
                       sim_find_zone(s, "default"), &zone, rp) ||
            !id_choice(rq, "pool", s->n_pools < 64 ? s->n_pools : 64, pool_ids, (ssize_t)p->pool,
                       &pool, rp))
                goto out;
        arch = sim_params_get(&rq->form, "architecture");
        if (arch && *arch && strcmp(arch, "amd64/generic") != 0) { /* the hosts' only one */
                sim_reply_field_error(rp, "architecture",
                                      "Select a valid choice. %s is not one of the available "
                                      "choices.",
                                      arch);
                goto out;
        }
        if (hostname && *hostname && !hostname_free(s, hostname)) {
                sim_reply_field_error(rp, "hostname", "Node with hostname \"%s\" already exists",
                                      hostname);
                goto out;
        }
        used_of(s, p, &u);
        oc = over_commit(p, &u, cores, mem);
        if (oc) {
                sim_reply_text(rp, 503, "Unable to compose KVM instance in '%s'. %s", p->name, oc);
                goto out;
        }
        sp = storage_pool_for(p, &u, want, (int64_t)(gb * GB), rp);
        if (sp < 0)
                goto out;
        m = create_vm(s, p, hostname && *hostname ? hostname : "composed-vm", cores, mem,
                      (size_t)zone, (size_t)pool, (size_t)sp, (int64_t)(gb * GB));
        if (!m) {
                sim_reply_text(rp, 500, "maas-sim could not add the VM");
                goto out;
        }
        doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "system_id", m->system_id);
        cJSON_AddStringToObject(doc, "resource_uri", "/MAAS/api/2.0/machines/");
        sim_reply_json(rp, doc);
        rp->delay_ms = s->faults.compose_delay_ms;
out:
        free(u.storage);
        free(want);
        free(oc);
}

const struct sim_op sim_ops_pods[] = {
        { "GET", NULL, pods_list },
        { NULL, NULL, NULL },
};

const struct sim_op sim_ops_pod[] = {
        { "GET", NULL, pod_read },
        { "POST", "compose", pod_compose },
        { NULL, NULL, NULL },
};
