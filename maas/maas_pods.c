/*
 * maas_pods: VM hosts decoded from GET pods/, and the choice of the host a VM is composed on
 * (maas_pods.h). The calls themselves are in maas_client.c's "VM hosts" section, beside the
 * request machinery they use. Pure functions; thread-safe.
 */
#include "maas_pods.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "json.h"
#include "maas_decode.h"
#include "xalloc.h"

#define GB            1000000000.0 /* MAAS's storage constraint unit (10^9 bytes) */
#define POD_COUNT_MAX 10000

/* --- decoding ------------------------------------------------------------------------------ */

static char *dup_str(const cJSON *o, const char *k)
{
        const char *s = json_find_str(o, k, NULL);

        return s ? xstrdup(s) : NULL;
}

/* An integral number in [0, 2^53], else dflt (a double out of range never becomes an integer). */
static int64_t num_i64(const cJSON *o, const char *k, int64_t dflt)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= 9007199254740992.0))
                return dflt;
        return (int64_t)v->valuedouble;
}

static double ratio(const cJSON *o, const char *k)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble <= 1000 ? v->valuedouble
                                                                                 : 1.0;
}

static int nested_id(const cJSON *o, const char *k)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
        int64_t id = cJSON_IsObject(v) ? num_i64(v, "id", -1) : -1;

        return id >= 0 && id <= INT_MAX ? (int)id : -1;
}

static char *nested_name(const cJSON *o, const char *k)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsObject(v) ? dup_str(v, "name") : NULL;
}

static void storage_pools_from_json(const cJSON *arr, struct maas_pod *p)
{
        const cJSON *e;
        size_t n = 0;

        if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
                return;
        p->storage_pools = xcalloc((size_t)cJSON_GetArraySize(arr), sizeof(*p->storage_pools));
        cJSON_ArrayForEach (e, arr) {
                const char *name = json_find_str(e, "name", NULL);
                const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "default");

                if (!name)
                        continue;
                p->storage_pools[n++] = (struct maas_storage_pool){
                        .name = xstrdup(name),
                        .total = num_i64(e, "total", 0),
                        .used = num_i64(e, "used", 0),
                        .is_default = cJSON_IsTrue(d),
                };
        }
        p->n_storage_pools = n;
}

static int pod_from_json(const cJSON *o, struct maas_pod *ret)
{
        const cJSON *total = cJSON_GetObjectItemCaseSensitive(o, "total");
        const cJSON *used = cJSON_GetObjectItemCaseSensitive(o, "used");
        const cJSON *host = cJSON_GetObjectItemCaseSensitive(o, "host");
        int64_t id = num_i64(o, "id", -1);
        struct maas_pod p = { 0 };

        if (!cJSON_IsObject(o) || id < 0 || id > INT_MAX || !json_find_str(o, "name", NULL))
                return CM_EPARSE;
        p.id = (int)id;
        p.name = dup_str(o, "name");
        p.type = dup_str(o, "type");
        p.zone = nested_name(o, "zone");
        p.pool = nested_name(o, "pool");
        p.zone_id = nested_id(o, "zone");
        p.pool_id = nested_id(o, "pool");
        p.host_system_id = cJSON_IsObject(host) ? dup_str(host, "system_id") : NULL;
        maas_strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "tags"), NULL, &p.tags);
        maas_strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "architectures"), NULL,
                            &p.architectures);
        p.cores_total = cJSON_IsObject(total) ? num_i64(total, "cores", 0) : 0;
        p.memory_total = cJSON_IsObject(total) ? num_i64(total, "memory", 0) : 0;
        p.cores_used = cJSON_IsObject(used) ? num_i64(used, "cores", 0) : 0;
        p.memory_used = cJSON_IsObject(used) ? num_i64(used, "memory", 0) : 0;
        p.cpu_ratio = ratio(o, "cpu_over_commit_ratio");
        p.memory_ratio = ratio(o, "memory_over_commit_ratio");
        storage_pools_from_json(cJSON_GetObjectItemCaseSensitive(o, "storage_pools"), &p);
        *ret = p;
        return 0;
}

void maas_pod_release(struct maas_pod *p)
{
        free(p->name);
        free(p->type);
        free(p->zone);
        free(p->pool);
        free(p->host_system_id);
        maas_strv_release(&p->tags);
        maas_strv_release(&p->architectures);
        for (size_t i = 0; i < p->n_storage_pools; i++)
                free(p->storage_pools[i].name);
        free(p->storage_pools);
        *p = (struct maas_pod){ 0 };
}

void maas_pod_list_release(struct maas_pod_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                maas_pod_release(&l->items[i]);
        free(l->items);
        *l = (struct maas_pod_list){ 0 };
}

static char *dup_or_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

static void strv_copy(const struct maas_strv *src, struct maas_strv *dst)
{
        *dst = (struct maas_strv){ 0 };
        if (!src->n)
                return;
        dst->v = xcalloc(src->n + 1, sizeof(char *));
        for (size_t i = 0; i < src->n; i++)
                dst->v[i] = xstrdup(src->v[i]);
        dst->n = src->n;
}

static void pod_copy(const struct maas_pod *src, struct maas_pod *dst)
{
        *dst = *src;
        dst->name = dup_or_null(src->name);
        dst->type = dup_or_null(src->type);
        dst->zone = dup_or_null(src->zone);
        dst->pool = dup_or_null(src->pool);
        dst->host_system_id = dup_or_null(src->host_system_id);
        strv_copy(&src->tags, &dst->tags);
        strv_copy(&src->architectures, &dst->architectures);
        dst->storage_pools = NULL;
        if (src->n_storage_pools) {
                dst->storage_pools = xcalloc(src->n_storage_pools, sizeof(*dst->storage_pools));
                for (size_t i = 0; i < src->n_storage_pools; i++) {
                        dst->storage_pools[i] = src->storage_pools[i];
                        dst->storage_pools[i].name = xstrdup(src->storage_pools[i].name);
                }
        }
}

void maas_pod_list_copy(const struct maas_pod_list *src, struct maas_pod_list *dst)
{
        *dst = (struct maas_pod_list){ 0 };
        if (!src->n)
                return;
        dst->items = xcalloc(src->n, sizeof(*dst->items));
        for (size_t i = 0; i < src->n; i++)
                pod_copy(&src->items[i], &dst->items[i]);
        dst->n = src->n;
}

int maas_pod_list_from_json(const cJSON *arr, struct maas_pod_list *ret)
{
        struct maas_pod_list l = { 0 };
        const cJSON *e;
        int n;

        if (!cJSON_IsArray(arr))
                return CM_EPARSE;
        n = cJSON_GetArraySize(arr);
        if (n > POD_COUNT_MAX)
                return CM_ETOOBIG;
        l.items = n ? xcalloc((size_t)n, sizeof(*l.items)) : NULL;
        cJSON_ArrayForEach (e, arr) {
                if (pod_from_json(e, &l.items[l.n]) < 0) {
                        maas_pod_list_release(&l);
                        return CM_EPARSE;
                }
                l.n++;
        }
        *ret = l;
        return 0;
}

/* --- the choice --------------------------------------------------------------------------------
 */

static bool has_tag(const struct maas_strv *v, const char *t)
{
        for (size_t i = 0; i < v->n; i++)
                if (strcmp(v->v[i], t) == 0)
                        return true;
        return false;
}

/* The host's architecture matching want ("amd64/generic" for "amd64" or "amd64/generic"). */
static const char *arch_of(const struct maas_pod *p, const char *want)
{
        size_t wl = strcspn(want, "/");

        for (size_t i = 0; i < p->architectures.n; i++) {
                const char *a = p->architectures.v[i];

                if (strcmp(a, want) == 0 ||
                    (!want[wl] && strncmp(a, want, wl) == 0 && (a[wl] == '/' || !a[wl])))
                        return a;
        }
        return NULL;
}

static bool candidate(const struct maas_pod *p, const struct maas_vm_request *rq)
{
        if (rq->zone && (!p->zone || strcmp(p->zone, rq->zone) != 0))
                return false;
        if (rq->pool && (!p->pool || strcmp(p->pool, rq->pool) != 0))
                return false;
        for (size_t i = 0; i < rq->n_tags; i++)
                if (!has_tag(&p->tags, rq->tags[i]))
                        return false;
        for (size_t i = 0; i < rq->n_not_tags; i++)
                if (has_tag(&p->tags, rq->not_tags[i]))
                        return false;
        if (rq->host_system_id &&
            (!p->host_system_id || strcmp(p->host_system_id, rq->host_system_id) != 0))
                return false;
        return !rq->arch || arch_of(p, rq->arch);
}

/* The storage pool the disk would go to: the named one, else the host's default, else the
 * one with the most room (MAAS's LXD driver looks in that order). NULL when none. */
static const struct maas_storage_pool *disk_pool(const struct maas_pod *p,
                                                 const struct maas_vm_request *rq)
{
        const struct maas_storage_pool *best = NULL;

        for (size_t i = 0; i < p->n_storage_pools; i++) {
                const struct maas_storage_pool *sp = &p->storage_pools[i];

                if (rq->storage_pool) {
                        if (strcmp(sp->name, rq->storage_pool) == 0)
                                return sp;
                        continue;
                }
                if (sp->is_default)
                        return sp;
                if (!best || sp->total - sp->used > best->total - best->used)
                        best = sp;
        }
        return best;
}

struct room {
        double cores, memory, disk_gb; /* free, over-commit applied */
        const struct maas_storage_pool *sp;
        unsigned lacks;
        double shortfall; /* the missing fraction of each resource it lacks, summed */
};

/* v, or 0 when it is negative (what a host has left can be below zero when over-committed).
 * Plain compares: libm stays out of the binary's libraries (and so of the image). */
static double at_least_0(double v)
{
        return v > 0 ? v : 0;
}

static void room_of(const struct maas_pod *p, const struct maas_vm_request *rq, struct room *r)
{
        *r = (struct room){ 0 };
        r->cores = (double)p->cores_total * p->cpu_ratio - (double)p->cores_used;
        r->memory = (double)p->memory_total * p->memory_ratio - (double)p->memory_used;
        r->sp = disk_pool(p, rq);
        r->disk_gb = r->sp ? (double)(r->sp->total - r->sp->used) / GB : 0;
        if (r->cores < (double)rq->cores) {
                r->lacks |= MAAS_POD_LACKS_CORES;
                r->shortfall += ((double)rq->cores - at_least_0(r->cores)) / (double)rq->cores;
        }
        if (r->memory < (double)rq->memory_mib) {
                r->lacks |= MAAS_POD_LACKS_MEMORY;
                r->shortfall +=
                        ((double)rq->memory_mib - at_least_0(r->memory)) / (double)rq->memory_mib;
        }
        if (r->disk_gb < (double)rq->disk_gb) {
                r->lacks |= MAAS_POD_LACKS_STORAGE;
                r->shortfall +=
                        ((double)rq->disk_gb - at_least_0(r->disk_gb)) / (double)rq->disk_gb;
        }
}

static unsigned bits(unsigned v)
{
        unsigned n = 0;

        for (; v; v &= v - 1)
                n++;
        return n;
}

static double score(const struct room *r, const struct maas_vm_request *rq)
{
        return r->cores / (double)rq->cores + r->memory / (double)rq->memory_mib;
}

/* Whether fitting host a (index ia) ranks before b. */
static bool better_fit(const struct maas_vm_request *rq,
                       size_t ia,
                       const struct room *a,
                       size_t ib,
                       const struct room *b)
{
        size_t ca = rq->counts ? rq->counts[ia] : 0, cb = rq->counts ? rq->counts[ib] : 0;

        if (ca != cb)
                return ca < cb;
        if (score(a, rq) != score(b, rq))
                return score(a, rq) > score(b, rq);
        return false; /* the earlier (lower index) stays */
}

static bool closer(const struct room *a, const struct room *b)
{
        if (bits(a->lacks) != bits(b->lacks))
                return bits(a->lacks) < bits(b->lacks);
        return a->shortfall < b->shortfall;
}

/* floor(v) as an integer, 0 below zero and capped at 9e15 (a positive double converts by
 * truncation, which is its floor). */
static int64_t floor_i64(double v)
{
        return v <= 0 ? 0 : v >= 9e15 ? INT64_C(9000000000000000) : (int64_t)v;
}

void maas_pod_choose(const struct maas_pod_list *hosts,
                     const struct maas_vm_request *rq,
                     struct maas_pod_choice *ret)
{
        struct room best = { 0 }, near = { 0 }, r;
        ssize_t chosen = -1, closest = -1;

        *ret = (struct maas_pod_choice){ .chosen = -1, .closest = -1 };
        for (size_t i = 0; i < hosts->n; i++) {
                if (!candidate(&hosts->items[i], rq))
                        continue;
                ret->candidates++;
                room_of(&hosts->items[i], rq, &r);
                if (!r.lacks) {
                        if (chosen < 0 || better_fit(rq, i, &r, (size_t)chosen, &best)) {
                                chosen = (ssize_t)i;
                                best = r;
                        }
                        continue;
                }
                if (closest < 0 || closer(&r, &near)) {
                        closest = (ssize_t)i;
                        near = r;
                }
        }
        ret->chosen = chosen;
        if (chosen >= 0) {
                ret->pool = best.sp->name;
                ret->arch = rq->arch ? arch_of(&hosts->items[chosen], rq->arch) : NULL;
                return;
        }
        ret->closest = closest;
        if (closest < 0)
                return;
        ret->lacks = near.lacks;
        ret->free_cores = floor_i64(near.cores);
        ret->free_memory = floor_i64(near.memory);
        ret->free_disk_gb = floor_i64(near.disk_gb);
}

char *maas_pod_lacks_text(const struct maas_pod_choice *ch, const struct maas_vm_request *rq)
{
        struct buf b;
        char *out;

        buf_init(&b, 1024);
        if (ch->lacks & MAAS_POD_LACKS_CORES)
                (void)!buf_printf(&b, "cores (%" PRId64 " free, %" PRId64 " wanted)",
                                  ch->free_cores, rq->cores);
        if (ch->lacks & MAAS_POD_LACKS_MEMORY)
                (void)!buf_printf(&b, "%smemory (%" PRId64 " MiB free, %" PRId64 " wanted)",
                                  b.len ? ", " : "", ch->free_memory, rq->memory_mib);
        if (ch->lacks & MAAS_POD_LACKS_STORAGE)
                (void)!buf_printf(&b, "%sstorage (%" PRId64 " GB free in %s, %" PRId64 " wanted)",
                                  b.len ? ", " : "", ch->free_disk_gb,
                                  rq->storage_pool ? rq->storage_pool : "its default pool",
                                  rq->disk_gb);
        out = xstrndup(b.data ? b.data : "", b.len);
        buf_release(&b);
        return out;
}
