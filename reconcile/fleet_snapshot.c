/*
 * fleet_snapshot: one list of every Deployed MAAS machine we hold, refreshed at most once per
 * --machine-refresh by whichever worker finds it due, so steady-state MaasMachines read
 * MAAS 100 machines a call instead of one GET each (beyond.md B6). See fleet_snapshot.h.
 */
#include "fleet_snapshot.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "reconciler.h"
#include "worker.h"
#include "xalloc.h"

static void strv_copy(const struct maas_strv *src, struct maas_strv *dst)
{
        dst->n = src->n;
        dst->v = src->n ? xcalloc(src->n, sizeof(char *)) : NULL;
        for (size_t i = 0; i < src->n; i++)
                dst->v[i] = xstrdup(src->v[i]);
}

static char *dup_or_null(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

static void node_copy(const struct maas_node *src, struct maas_node *dst)
{
        *dst = *src;
        dst->system_id = dup_or_null(src->system_id);
        dst->hostname = dup_or_null(src->hostname);
        dst->fqdn = dup_or_null(src->fqdn);
        dst->zone = dup_or_null(src->zone);
        dst->pool = dup_or_null(src->pool);
        dst->status_name = dup_or_null(src->status_name);
        dst->power_state = dup_or_null(src->power_state);
        dst->power_type = dup_or_null(src->power_type);
        dst->osystem = dup_or_null(src->osystem);
        dst->distro_series = dup_or_null(src->distro_series);
        dst->owner = dup_or_null(src->owner);
        dst->owner_data = src->owner_data ? cJSON_Duplicate(src->owner_data, true) : NULL;
        strv_copy(&src->tags, &dst->tags);
        strv_copy(&src->ip_addresses, &dst->ip_addresses);
}

#define FLEET_CHUNK       100
#define FLEET_MIN_WAIT_MS 100

struct fleet_ids {
        char **ids;
        size_t n, cap;
};

/* informer_each: keeps the systemID of a Deployed MaasMachine. */
static void fleet_id_of(void *arg, struct kube_object *obj)
{
        struct fleet_ids *f = arg;
        const cJSON *o = kube_object_json(obj);
        const char *sid = json_find_str(o, "spec", "systemID", NULL);
        const char *st = json_find_str(o, "status", "machineState", NULL);

        if (!sid || !st || strcmp(st, "Deployed") != 0)
                return;
        if (f->n == f->cap) {
                f->cap = f->cap ? f->cap * 2 : 64;
                f->ids = xrealloc(f->ids, f->cap * sizeof(*f->ids));
        }
        f->ids[f->n++] = xstrdup(sid);
}

/* The systemIDs of every Deployed MaasMachine, reading the cache one object at a time. */
static void fleet_ids(struct provider *p, char ***ret, size_t *ret_n)
{
        struct fleet_ids f = { 0 };

        (void)informer_each(p->maasmachines, NULL, NULL, fleet_id_of, &f);
        *ret = f.ids;
        *ret_n = f.n;
}

static int cmp_node_id(const void *a, const void *b)
{
        return strcmp(((const struct maas_node *)a)->system_id,
                      ((const struct maas_node *)b)->system_id);
}

/* Lists every Deployed machine we hold, 100 ids a call, sorted by system_id. Runs without
 * the fleet lock: lookups go on against the previous list meanwhile. */
static int fleet_fetch(struct reconciler_worker *w, struct maas_node_list *ret)
{
        struct provider *p = w->p;
        struct maas_node_list all = { 0 };
        struct maas_error me = { 0 };
        char **ids = NULL;
        size_t n = 0;
        int err = 0;

        fleet_ids(p, &ids, &n);
        for (size_t off = 0; off < n && err == 0; off += FLEET_CHUNK) {
                struct maas_node_list part = { 0 };
                size_t m = n - off < FLEET_CHUNK ? n - off : FLEET_CHUNK;
                struct maas_node_filter f = { .ids = (const char *const *)ids + off, .n_ids = m };

                err = maas_list_machines(w->maas, &f, &part, &me);
                reconciler_maas_count(p, "list_machines", err, &me);
                maas_error_release(&me);
                if (err == 0)
                        maas_node_list_append(&all, &part);
        }
        for (size_t i = 0; i < n; i++)
                free(ids[i]);
        free(ids);
        if (err) {
                maas_node_list_release(&all);
                return err;
        }
        if (all.n > 1)
                qsort(all.items, all.n, sizeof(*all.items), cmp_node_id);
        *ret = all;
        return 0;
}

/* Whether this caller should fetch the next list: the list is due and nobody else is
 * fetching it. Lock held. */
static bool fleet_claim(struct provider *p, uint64_t now)
{
        if (p->fleet.refreshing ||
            (p->fleet.fetched_ms && now - p->fleet.fetched_ms < p->settings.machine_refresh_ms))
                return false;
        p->fleet.refreshing = true;
        return true;
}

static void fleet_refresh(struct reconciler_worker *w)
{
        struct provider *p = w->p;
        struct maas_node_list all = { 0 };
        int err = fleet_fetch(w, &all);

        pthread_mutex_lock(&p->fleet_lock);
        if (err == 0) {
                maas_node_list_release(&p->fleet.nodes);
                p->fleet.nodes = all;
                p->fleet.valid = true;
        }
        /* after a failure too: the next attempt waits an interval, lookups fall back to a
         * GET per machine meanwhile only if no list was ever fetched */
        p->fleet.fetched_ms = clock_now_ms(p->clock);
        p->fleet.refreshing = false;
        pthread_cond_broadcast(&p->fleet_cond);
        pthread_mutex_unlock(&p->fleet_lock);
}

/* The list is due (never fetched, or an interval old). Lock held. */
static bool fleet_due(const struct provider *p, uint64_t now)
{
        return !p->fleet.fetched_ms || now - p->fleet.fetched_ms >= p->settings.machine_refresh_ms;
}

uint64_t fleet_snapshot_next_ms(struct provider *p)
{
        uint64_t every = p->settings.machine_refresh_ms, now = clock_now_ms(p->clock), at;

        pthread_mutex_lock(&p->fleet_lock);
        at = p->fleet.fetched_ms ? p->fleet.fetched_ms + every : 0;
        pthread_mutex_unlock(&p->fleet_lock);
        if (!at || at <= now)
                return every;
        return at - now < FLEET_MIN_WAIT_MS ? FLEET_MIN_WAIT_MS : at - now;
}

int fleet_snapshot_lookup(struct reconciler_worker *w, const char *system_id, struct maas_node *ret)
{
        struct provider *p = w->p;
        struct maas_node key = { .system_id = (char *)(uintptr_t)system_id };
        const struct maas_node *hit;
        uint64_t now = clock_now_ms(p->clock);
        bool fetch;
        int err = CM_ENOTFOUND;

        pthread_mutex_lock(&p->fleet_lock);
        fetch = fleet_claim(p, now);
        /* Another worker is fetching a list that is due: wait for it rather than read the
         * stale one, so every pass of an interval sees that interval's list. */
        while (!fetch && p->fleet.refreshing && fleet_due(p, now))
                pthread_cond_wait(&p->fleet_cond, &p->fleet_lock);
        pthread_mutex_unlock(&p->fleet_lock);
        if (fetch)
                fleet_refresh(w);
        pthread_mutex_lock(&p->fleet_lock);
        hit = p->fleet.valid && p->fleet.nodes.n
                      ? bsearch(&key, p->fleet.nodes.items, p->fleet.nodes.n,
                                sizeof(*p->fleet.nodes.items), cmp_node_id)
                      : NULL;
        if (hit) {
                node_copy(hit, ret);
                err = 0;
        }
        pthread_mutex_unlock(&p->fleet_lock);
        return err;
}
