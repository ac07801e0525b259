/*
 * maas_inventory: the MAAS inventory cache behind the admission checks. One mutex guards the
 * published snapshot, the last refresh result and the refresh sequence numbers; a refresh
 * itself (seven MAAS calls, more for a large region) runs without it. Sequence numbers make a miss
 * wait for a refresh that STARTED after the miss (req_seq is bumped by askers, started_seq is the
 * req_seq a refresh saw when it began, done_seq the started_seq of the last finished refresh).
 */
#include "maas_inventory.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "maas_inventory_net.h"
#include "metrics.h"
#include "xalloc.h"

#define DEFAULT_INTERVAL_MS  60000u
#define DEFAULT_MISS_WAIT_MS 2000u
#define DEFAULT_MISS_GAP_MS  10000u
#define DEFAULT_RETRY_MS     5000u
#define DEFAULT_CALL_MS      10000u
#define STALE_INTERVALS      10u
#define STATUS_READY         4

struct maas_inventory {
        pthread_mutex_t lock;
        pthread_cond_t cond; /* CLOCK_MONOTONIC: refresh asked, refresh done, stop */
        struct maas_config cfg;
        struct http_transport_opts http;
        char *ca_file;
        uint64_t interval_ms, miss_wait_ms, miss_gap_ms, retry_ms;
        uint32_t call_timeout_ms;
        struct token_bucket *budget; /* borrowed; NULL = unlimited */
        const struct clock_ops *clock;
        bool no_thread;
        /* the refresher's own */
        struct http_transport *transport;
        bool own_transport;
        struct maas_client *client;
        /* under lock */
        struct maas_inventory_snapshot *snap;
        enum maas_inv_state last;
        char *last_detail;
        uint64_t req_seq, started_seq, done_seq;
        uint64_t miss_target; /* req_seq of the latest miss refresh */
        uint64_t last_miss_ms;
        bool any_miss;
        bool stop;
        _Atomic bool want_pods; /* list the VM hosts too (maas_inventory_want_pods) */
        pthread_t thread;
        bool has_thread;
        /* metrics (NULL without a registry) */
        struct metric_series *age;
        struct metric_series *refreshes;
        struct metric_series *errors[MAAS_INV_STATE_COUNT];
        struct metric_series *skipped[MAAS_INV_STATE_COUNT];
        /* the listener; listen_lock is held across each call so that removing it waits */
        pthread_mutex_t listen_lock;
        maas_inventory_listener_fn *listener;
        void *listener_ud;
};

static const char *const state_names[MAAS_INV_STATE_COUNT] = {
        [MAAS_INV_OK] = "ok",
        [MAAS_INV_NOT_LOADED] = "not_loaded",
        [MAAS_INV_UNREACHABLE] = "unreachable",
        [MAAS_INV_UNAUTHORIZED] = "unauthorized",
        [MAAS_INV_FAILED] = "failed",
        [MAAS_INV_STALE] = "stale",
};

const char *maas_inv_state_name(enum maas_inv_state s)
{
        return s < MAAS_INV_STATE_COUNT ? state_names[s] : "unknown";
}

static _Atomic uint64_t snapshot_gen;

/* --- snapshots ------------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_sort(struct maas_inv_names *n)
{
        if (n->n > 1)
                qsort(n->v, n->n, sizeof(*n->v), cmp_str);
}

static void names_from_list(struct maas_inv_names *out, const struct maas_named_list *l)
{
        out->v = xcalloc(l->n ? l->n : 1, sizeof(*out->v));
        for (size_t i = 0; i < l->n; i++)
                if (l->items[i].name)
                        out->v[out->n++] = xstrdup(l->items[i].name);
        names_sort(out);
}

static void boots_from_images(struct maas_inventory_snapshot *s,
                              const struct maas_boot_resource_list *l)
{
        s->boots = xcalloc(l->n ? l->n : 1, sizeof(*s->boots));
        for (size_t i = 0; i < l->n; i++) {
                const struct maas_boot_resource *b = &l->items[i];

                if (!b->name)
                        continue;
                s->boots[s->n_boots++] = (struct maas_inv_boot){
                        .name = xstrdup(b->name),
                        .architecture = xstrdup(b->architecture ? b->architecture : ""),
                        .subarches = xstrdup(b->subarches ? b->subarches : ""),
                        .base_image = b->base_image ? xstrdup(b->base_image) : NULL,
                };
        }
}

static void names_from_images(struct maas_inv_names *out, const struct maas_boot_resource_list *l)
{
        out->v = xcalloc(l->n ? l->n : 1, sizeof(*out->v));
        for (size_t i = 0; i < l->n; i++)
                if (l->items[i].name)
                        out->v[out->n++] = xstrdup(l->items[i].name);
        names_sort(out);
}

long maas_inv_find(const struct maas_inventory_snapshot *s, enum maas_inv_kind k, const char *name)
{
        const struct maas_inv_names *n = &s->names[k];
        char *const *hit;

        if (!name || n->n == 0)
                return -1;
        hit = bsearch(&name, n->v, n->n, sizeof(*n->v), cmp_str);
        return hit ? (long)(hit - n->v) : -1;
}

static void machine_from_node(const struct maas_inventory_snapshot *s,
                              const struct maas_node *nd,
                              struct maas_inv_machine *m)
{
        long t;

        m->system_id = xstrdup(nd->system_id ? nd->system_id : "");
        m->status = nd->status;
        m->cpu_count = nd->cpu_count;
        m->memory_mib = nd->memory_mib;
        m->architecture = xstrdup(nd->architecture ? nd->architecture : "");
        m->storage_mb = nd->storage_mb;
        m->zone = (int32_t)maas_inv_find(s, MAAS_INV_ZONE, nd->zone);
        if (m->zone >= 0)
                s->zone_machines[m->zone]++;
        m->pool = (int32_t)maas_inv_find(s, MAAS_INV_POOL, nd->pool);
        m->tags = xcalloc(nd->tags.n ? nd->tags.n : 1, sizeof(*m->tags));
        for (size_t i = 0; i < nd->tags.n; i++) {
                t = maas_inv_find(s, MAAS_INV_TAG, nd->tags.v[i]);
                if (t >= 0)
                        m->tags[m->n_tags++] = (uint32_t)t;
                if (t >= 0 && t < 64)
                        m->tag_mask |= UINT64_C(1) << t;
        }
}

struct maas_inventory_snapshot *maas_inventory_snapshot_build(const struct maas_inventory_lists *l,
                                                              uint64_t taken_ms)
{
        const struct maas_node_list *machines = &l->machines;
        struct maas_inventory_snapshot *s = xcalloc(1, sizeof(*s));

        atomic_init(&s->refs, 1);
        s->gen = atomic_fetch_add_explicit(&snapshot_gen, 1, memory_order_relaxed) + 1;
        s->taken_ms = taken_ms;
        names_from_list(&s->names[MAAS_INV_ZONE], &l->zones);
        names_from_list(&s->names[MAAS_INV_POOL], &l->pools);
        names_from_list(&s->names[MAAS_INV_TAG], &l->tags);
        names_from_list(&s->names[MAAS_INV_DOMAIN], &l->domains);
        names_from_images(&s->names[MAAS_INV_IMAGE], &l->images);
        boots_from_images(s, &l->images);
        s->zone_machines = xcalloc(s->names[MAAS_INV_ZONE].n ? s->names[MAAS_INV_ZONE].n : 1,
                                   sizeof(*s->zone_machines));
        s->machines = xcalloc(machines->n ? machines->n : 1, sizeof(*s->machines));
        for (size_t i = 0; i < machines->n; i++)
                machine_from_node(s, &machines->items[i], &s->machines[i]);
        s->n_machines = machines->n;
        maas_inv_net_build(s, l);
        s->pods_state = l->pods_state;
        maas_pod_list_copy(&l->pods, &s->pods);
        return s;
}

static void snapshot_free(struct maas_inventory_snapshot *s)
{
        for (size_t k = 0; k < MAAS_INV_KIND_COUNT; k++) {
                for (size_t i = 0; i < s->names[k].n; i++)
                        free(s->names[k].v[i]);
                free(s->names[k].v);
        }
        for (size_t i = 0; i < s->n_machines; i++) {
                free(s->machines[i].system_id);
                free(s->machines[i].architecture);
                free(s->machines[i].tags);
        }
        free(s->machines);
        for (size_t i = 0; i < s->n_boots; i++) {
                free(s->boots[i].name);
                free(s->boots[i].architecture);
                free(s->boots[i].subarches);
                free(s->boots[i].base_image);
        }
        free(s->boots);
        free(s->zone_machines);
        maas_inv_net_free(s);
        maas_pod_list_release(&s->pods);
        free(s);
}

void maas_inventory_snapshot_release(struct maas_inventory_snapshot *s)
{
        if (s && atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
                snapshot_free(s);
}

bool maas_inv_has_image(const struct maas_inventory_snapshot *s, const char *image)
{
        char *os = NULL;
        char *series = NULL;
        char *custom = NULL;
        bool found;

        if (!image || !image[0])
                return false;
        if (maas_inv_find(s, MAAS_INV_IMAGE, image) >= 0)
                return true;
        maas_split_image(image, &os, &series);
        found = false;
        if (strcmp(os, "custom") == 0) {
                custom = xasprintf("custom/%s", series);
                found = maas_inv_find(s, MAAS_INV_IMAGE, series) >= 0 ||
                        maas_inv_find(s, MAAS_INV_IMAGE, custom) >= 0;
        }
        free(custom);
        free(os);
        free(series);
        return found;
}

/* --- fit ------------------------------------------------------------------------------------- */

static bool status_in_use(int status)
{
        /* Reserved, Deployed, Deploying, Allocated, Releasing, Disk erasing. */
        static const int in_use[] = { 5, 6, 9, 10, 12, 14 };

        for (size_t i = 0; i < ARRAY_SIZE(in_use); i++)
                if (status == in_use[i])
                        return true;
        return false;
}

static bool has_tag(const struct maas_inv_machine *m, uint32_t tag)
{
        for (size_t i = 0; i < m->n_tags; i++)
                if (m->tags[i] == tag)
                        return true;
        return false;
}

/* Resolves the query names; false when one is unknown (then nothing can match). */
static bool resolve(const struct maas_inventory_snapshot *s,
                    const struct maas_inv_query *q,
                    long *pool,
                    long *zone,
                    uint32_t *tags)
{
        long t;

        *pool = q->pool ? maas_inv_find(s, MAAS_INV_POOL, q->pool) : -2;
        *zone = q->zone ? maas_inv_find(s, MAAS_INV_ZONE, q->zone) : -2;
        if (*pool == -1 || *zone == -1)
                return false;
        for (size_t i = 0; i < q->n_tags; i++) {
                t = maas_inv_find(s, MAAS_INV_TAG, q->tags[i]);
                if (t < 0)
                        return false;
                tags[i] = (uint32_t)t;
        }
        return true;
}

/* The resolved query: pool and zone indices (-2 = any), the tags as a mask when every one
 * is among the first 64, else as an index list. */
struct resolved {
        long pool, zone;
        uint64_t mask;
        bool use_mask;
        const uint32_t *tags;
        size_t n_tags;
};

static bool candidate(const struct maas_inv_machine *m, const struct resolved *q)
{
        if ((q->pool >= 0 && m->pool != q->pool) || (q->zone >= 0 && m->zone != q->zone))
                return false;
        if (q->use_mask)
                return (m->tag_mask & q->mask) == q->mask;
        for (size_t i = 0; i < q->n_tags; i++)
                if (!has_tag(m, q->tags[i]))
                        return false;
        return true;
}

static void count_fit(const struct maas_inv_machine *m,
                      const struct maas_inv_query *q,
                      struct maas_inv_fit *f)
{
        f->candidates++;
        if (m->cpu_count > f->max_cpu)
                f->max_cpu = m->cpu_count;
        if (m->memory_mib > f->max_memory_mib)
                f->max_memory_mib = m->memory_mib;
        if (m->cpu_count < q->min_cpu)
                return;
        if (m->memory_mib > f->max_memory_with_cpu)
                f->max_memory_with_cpu = m->memory_mib;
        if (m->memory_mib < q->min_memory_mib)
                return;
        if (f->fit == 0 || m->cpu_count < f->min_fit_cpu)
                f->min_fit_cpu = m->cpu_count;
        if (f->fit == 0 || m->memory_mib < f->min_fit_memory_mib)
                f->min_fit_memory_mib = m->memory_mib;
        if (f->fit == 0)
                f->fit_architecture = m->architecture;
        else if (f->fit_architecture && strcmp(f->fit_architecture, m->architecture) != 0)
                f->fit_architecture = NULL;
        f->fit++;
        if (m->status == STATUS_READY)
                f->fit_free++;
        else if (status_in_use(m->status))
                f->fit_in_use++;
}

static void fit_scan(const struct maas_inventory_snapshot *s,
                     const struct maas_inv_query *q,
                     struct maas_inv_fit *ret)
{
        struct maas_inv_fit f = { 0 };
        uint32_t tags_small[16];
        uint32_t *tags = q->n_tags <= ARRAY_SIZE(tags_small) ? tags_small
                                                             : xcalloc(q->n_tags, sizeof(*tags));
        struct resolved rq = { .tags = tags, .n_tags = q->n_tags, .use_mask = true };

        if (resolve(s, q, &rq.pool, &rq.zone, tags)) {
                for (size_t i = 0; i < q->n_tags; i++) {
                        rq.use_mask = rq.use_mask && tags[i] < 64;
                        rq.mask |= tags[i] < 64 ? UINT64_C(1) << tags[i] : 0;
                }
                for (size_t i = 0; i < s->n_machines; i++)
                        if (candidate(&s->machines[i], &rq))
                                count_fit(&s->machines[i], q, &f);
        }
        if (tags != tags_small)
                free(tags);
        *ret = f;
}

/* A per-thread memo of fit answers: (snapshot generation, query) -> answer. Snapshots are
 * immutable and generations never repeat, so an entry is right for as long as it exists. */
#define FIT_MEMO_SLOTS 4
#define FIT_KEY_MAX    512

struct fit_memo {
        uint64_t gen; /* 0 = empty */
        size_t key_len;
        char key[FIT_KEY_MAX];
        struct maas_inv_fit f;
};

static _Thread_local struct fit_memo fit_memo[FIT_MEMO_SLOTS];
static _Thread_local unsigned fit_memo_next;

static bool key_add(char *key, size_t *len, const void *p, size_t n)
{
        if (*len + n > FIT_KEY_MAX)
                return false;
        memcpy(key + *len, p, n);
        *len += n;
        return true;
}

/* A string with its NUL; NULL (any) as "\1", which no MAAS name is. */
static bool key_str(char *key, size_t *len, const char *str)
{
        const char *v = str ? str : "\1";

        return key_add(key, len, v, strlen(v) + 1);
}

/* The query as bytes; false when it does not fit FIT_KEY_MAX. */
static bool fit_key(const struct maas_inv_query *q, char *key, size_t *ret_len)
{
        size_t len = 0;
        bool ok = key_add(key, &len, &q->min_cpu, sizeof(q->min_cpu)) &&
                  key_add(key, &len, &q->min_memory_mib, sizeof(q->min_memory_mib)) &&
                  key_str(key, &len, q->pool) && key_str(key, &len, q->zone);

        for (size_t i = 0; ok && i < q->n_tags; i++)
                ok = key_str(key, &len, q->tags[i]);
        *ret_len = len;
        return ok;
}

void maas_inv_fit(const struct maas_inventory_snapshot *s,
                  const struct maas_inv_query *q,
                  struct maas_inv_fit *ret)
{
        char key[FIT_KEY_MAX];
        struct fit_memo *m;
        size_t len;

        if (!fit_key(q, key, &len)) {
                fit_scan(s, q, ret);
                return;
        }
        for (size_t i = 0; i < FIT_MEMO_SLOTS; i++) {
                m = &fit_memo[i];
                if (m->gen == s->gen && m->key_len == len && memcmp(m->key, key, len) == 0) {
                        *ret = m->f;
                        return;
                }
        }
        fit_scan(s, q, ret);
        m = &fit_memo[fit_memo_next++ % FIT_MEMO_SLOTS];
        m->gen = s->gen;
        m->key_len = len;
        memcpy(m->key, key, len);
        m->f = *ret;
}

size_t maas_inv_zones_with_machines(const struct maas_inventory_snapshot *s, const char ***ret)
{
        const struct maas_inv_names *z = &s->names[MAAS_INV_ZONE];
        const char **v = NULL;
        size_t n = 0;

        for (size_t i = 0; i < z->n; i++)
                if (s->zone_machines[i]) {
                        if (!v)
                                v = xcalloc(z->n, sizeof(*v));
                        v[n++] = z->v[i];
                }
        *ret = v;
        return n;
}

/* --- metrics --------------------------------------------------------------------------------- */

static void collect_age(struct metrics *m, void *ud)
{
        struct maas_inventory *inv = ud;
        double age = -1;

        (void)m;
        pthread_mutex_lock(&inv->lock);
        if (inv->snap)
                age = (double)(clock_now_ms(inv->clock) - inv->snap->taken_ms) / 1000.0;
        pthread_mutex_unlock(&inv->lock);
        metric_gauge_set(inv->age, age);
}

static int register_metrics(struct maas_inventory *inv, struct metrics *m)
{
        static const char *const reason[] = { "reason", NULL };
        struct metric_family *age, *refreshes, *errors, *skipped;
        int r;

        r = metrics_gauge(m, "capmaas_maas_inventory_age_seconds",
                          "Seconds since the MAAS inventory cache was last refreshed "
                          "successfully (-1: never).",
                          NULL, &age);
        if (r == 0)
                r = metrics_counter(m, "capmaas_maas_inventory_refreshes_total",
                                    "MAAS inventory refreshes attempted.", NULL, &refreshes);
        if (r == 0)
                r = metrics_counter(m, "capmaas_maas_inventory_refresh_errors_total",
                                    "MAAS inventory refreshes that failed, by reason.", reason,
                                    &errors);
        if (r == 0)
                r = metrics_counter(m, "capmaas_admission_maas_checks_skipped_total",
                                    "Admission requests whose MAAS checks were skipped, by "
                                    "reason.",
                                    reason, &skipped);
        if (r < 0)
                return r;
        inv->age = metric_series(age, NULL);
        metric_gauge_set(inv->age, -1);
        inv->refreshes = metric_series(refreshes, NULL);
        for (int i = MAAS_INV_NOT_LOADED; i < MAAS_INV_STATE_COUNT; i++) {
                if (i != MAAS_INV_NOT_LOADED && i != MAAS_INV_STALE)
                        inv->errors[i] = metric_series(errors, state_names[i]);
                inv->skipped[i] = metric_series(skipped, state_names[i]);
        }
        return metrics_add_collector(m, collect_age, inv, NULL);
}

void maas_inventory_note_skipped(struct maas_inventory *inv, enum maas_inv_state reason)
{
        if (inv && reason < MAAS_INV_STATE_COUNT && inv->skipped[reason])
                metric_counter_inc(inv->skipped[reason]);
}

/* --- refresh --------------------------------------------------------------------------------- */

static int ensure_client(struct maas_inventory *inv)
{
        int r;

        if (inv->client)
                return CM_OK;
        if (!inv->transport) {
                r = http_transport_curl_new(&inv->http, &inv->transport);
                if (r < 0)
                        return r;
                inv->own_transport = true;
        }
        return maas_client_new(
                &(struct maas_client_opts){ .cfg = &inv->cfg,
                                            .transport = inv->transport,
                                            .max_attempts = 2,
                                            .backoff = { .base_ms = 100, .max_ms = 500 },
                                            .max_retry_after_ms = 1000,
                                            .timeout_ms = inv->call_timeout_ms,
                                            .budget = inv->budget },
                &inv->client);
}

static void lists_release(struct maas_inventory_lists *l)
{
        maas_named_list_release(&l->zones);
        maas_named_list_release(&l->pools);
        maas_named_list_release(&l->tags);
        maas_named_list_release(&l->domains);
        maas_boot_resource_list_release(&l->images);
        maas_subnet_list_release(&l->subnets);
        maas_ip_address_list_release(&l->reserved_mine);
        maas_ip_address_list_release(&l->reserved_all);
        maas_ip_range_list_release(&l->ranges);
        maas_node_list_release(&l->machines);
        maas_pod_list_release(&l->pods);
}

void maas_inventory_want_pods(struct maas_inventory *inv)
{
        atomic_store(&inv->want_pods, true);
}

/* The VM hosts, when asked for: never fails the refresh (the rest of the snapshot is good). */
static void list_pods(struct maas_inventory *inv, struct maas_inventory_lists *l)
{
        struct maas_error err = { 0 };
        int r;

        if (!atomic_load(&inv->want_pods))
                return;
        r = maas_list_pods(inv->client, &l->pods, &err);
        l->pods_state = r == 0                                      ? MAAS_INV_PODS_OK
                        : r == CM_EUNSUPPORTED || r == CM_ENOTFOUND ? MAAS_INV_PODS_NONE
                                                                    : MAAS_INV_PODS_FAILED;
        maas_error_release(&err);
}

/* Says which zone's list failed, so the operator knows where MAAS answers too much. */
static void name_the_zone(struct maas_error *err, const char *zone, int r)
{
        char *msg = xasprintf("zone %s: %s", zone, err->message ? err->message : cm_strerror(r));

        free(err->message);
        err->message = msg;
}

/* Machines zone by zone: the same machines as one unfiltered list, in smaller requests.
 * Each list is decoded machine by machine as it arrives (maas_list_machines), so a zone of
 * any size needs no further split; a zone whose list is refused (a machine over the
 * per-machine cap) is named. */
static int list_machines_by_zone(struct maas_client *mc,
                                 const struct maas_named_list *zones,
                                 struct maas_node_list *ret,
                                 struct maas_error *err)
{
        struct maas_node_list all = { 0 };
        int r = 0;

        for (size_t i = 0; i < zones->n && r == 0; i++) {
                struct maas_node_list part = { 0 };
                const char *zone = zones->items[i].name;

                r = maas_list_machines(mc, &(struct maas_node_filter){ .zone = zone }, &part, err);
                maas_node_list_append(&all, &part);
                if (r == CM_ETOOBIG || r == CM_EPARSE)
                        name_the_zone(err, zone, r);
        }
        if (r == 0)
                *ret = all;
        else
                maas_node_list_release(&all);
        return r;
}

/* Subnets; a MAAS (or a stand-in) without subnets/ is a snapshot that knows none. */
static int list_subnets(struct maas_client *mc,
                        struct maas_inventory_lists *l,
                        struct maas_error *err)
{
        int r = maas_list_subnets(mc, &l->subnets, err);

        if (r == CM_ENOTFOUND) {
                maas_error_release(err);
                l->no_subnets = true;
                return 0;
        }
        return r;
}

/* A list MAAS may refuse without the inventory failing: 404 (a MAAS or stand-in without
 * it) and 403 (every user's reservations need an administrator) are an empty list. */
static int tolerate(int r, struct maas_error *err)
{
        if (r == CM_ENOTFOUND || r == CM_EFORBIDDEN) {
                maas_error_release(err);
                return 0;
        }
        return r;
}

/* User reservations (capmaas's user's, then everyone's) and IP ranges. */
static int list_addresses(struct maas_client *mc,
                          struct maas_inventory_lists *l,
                          struct maas_error *err)
{
        int r = tolerate(maas_list_ip_addresses(mc, NULL, false, &l->reserved_mine, err), err);

        if (r == 0)
                r = tolerate(maas_list_ip_addresses(mc, NULL, true, &l->reserved_all, err), err);
        if (r == 0)
                r = tolerate(maas_list_ip_ranges(mc, &l->ranges, err), err);
        return r;
}

/* The list calls; *ret_what names the one that failed. */
static int fetch_lists(struct maas_client *mc,
                       struct maas_inventory_lists *l,
                       struct maas_error *err,
                       const char **ret_what)
{
        int r;

        r = maas_list_zones(mc, &l->zones, err);
        *ret_what = "zones";
        if (r == 0) {
                r = maas_list_pools(mc, &l->pools, err);
                *ret_what = "resource pools";
        }
        if (r == 0) {
                r = maas_list_tags(mc, &l->tags, err);
                *ret_what = "tags";
        }
        if (r == 0) {
                r = maas_list_domains(mc, &l->domains, err);
                *ret_what = "domains";
        }
        if (r == 0) {
                r = maas_list_boot_resources(mc, &l->images, err);
                *ret_what = "boot resources";
        }
        if (r == 0) {
                r = list_subnets(mc, l, err);
                *ret_what = "subnets";
        }
        if (r == 0) {
                r = list_addresses(mc, l, err);
                *ret_what = "IP addresses";
        }
        if (r == 0) {
                r = list_machines_by_zone(mc, &l->zones, &l->machines, err);
                *ret_what = "machines";
        }
        return r;
}

static enum maas_inv_state classify(int r, const struct maas_error *err)
{
        if (r == CM_EUNAUTHORIZED || r == CM_EFORBIDDEN)
                return MAAS_INV_UNAUTHORIZED;
        if (r == CM_ETOOBIG) /* MAAS answered, with more than we buffer */
                return MAAS_INV_FAILED;
        if (err->cls == MAAS_ERR_TRANSIENT || r == CM_ETRANSPORT || r == CM_ETIMEDOUT ||
            r == CM_ESERVER)
                return MAAS_INV_UNREACHABLE;
        return MAAS_INV_FAILED;
}

static void log_transition(enum maas_inv_state from, enum maas_inv_state to, const char *detail)
{
        if (from == to)
                return;
        if (to == MAAS_INV_OK)
                log_info("maas-inventory", "MAAS inventory refreshed; admission checks active",
                         "previous=%s", maas_inv_state_name(from));
        else
                log_warn("maas-inventory",
                         "MAAS inventory refresh failed; admission MAAS checks are skipped",
                         "state=%s err=%s", maas_inv_state_name(to), detail ? detail : "");
}

/* Publishes a refresh result (snap NULL on failure) and wakes the waiters. */
static void publish(struct maas_inventory *inv,
                    struct maas_inventory_snapshot *snap,
                    enum maas_inv_state state,
                    char *detail,
                    uint64_t seq)
{
        struct maas_inventory_snapshot *old = NULL;
        enum maas_inv_state prev;

        pthread_mutex_lock(&inv->lock);
        if (snap) {
                old = inv->snap;
                inv->snap = snap;
        }
        prev = inv->last;
        inv->last = state;
        free(inv->last_detail);
        inv->last_detail = detail;
        if (seq > inv->done_seq)
                inv->done_seq = seq;
        pthread_cond_broadcast(&inv->cond);
        pthread_mutex_unlock(&inv->lock);
        maas_inventory_snapshot_release(old);
        log_transition(prev, state, detail);
}

static void notify(struct maas_inventory *inv, const struct maas_inventory_snapshot *snap)
{
        pthread_mutex_lock(&inv->listen_lock);
        if (inv->listener)
                inv->listener(inv->listener_ud, snap);
        pthread_mutex_unlock(&inv->listen_lock);
}

void maas_inventory_set_listener(struct maas_inventory *inv,
                                 maas_inventory_listener_fn *fn,
                                 void *ud)
{
        pthread_mutex_lock(&inv->listen_lock);
        inv->listener = fn;
        inv->listener_ud = ud;
        pthread_mutex_unlock(&inv->listen_lock);
}

int maas_inventory_refresh(struct maas_inventory *inv)
{
        struct maas_error err = { 0 };
        struct maas_inventory_lists l = { 0 };
        const char *what = NULL;
        struct maas_inventory_snapshot *snap = NULL;
        uint64_t seq;
        int r;

        pthread_mutex_lock(&inv->lock);
        seq = inv->started_seq = inv->req_seq;
        pthread_mutex_unlock(&inv->lock);
        if (inv->refreshes)
                metric_counter_inc(inv->refreshes);
        r = ensure_client(inv);
        if (r == 0)
                r = fetch_lists(inv->client, &l, &err, &what);
        if (r == 0)
                list_pods(inv, &l);
        if (r == 0) {
                snap = maas_inventory_snapshot_build(&l, clock_now_ms(inv->clock));
                atomic_fetch_add_explicit(&snap->refs, 1, memory_order_relaxed); /* the call's */
                publish(inv, snap, MAAS_INV_OK, NULL, seq);
                notify(inv, snap);
                maas_inventory_snapshot_release(snap);
        } else {
                enum maas_inv_state st = classify(r, &err);

                if (inv->errors[st])
                        metric_counter_inc(inv->errors[st]);
                publish(inv, NULL, st,
                        xasprintf("%s%s: %s", what ? "listing " : "creating the MAAS client",
                                  what ? what : "", err.message ? err.message : maas_strerror(r)),
                        seq);
        }
        lists_release(&l);
        maas_error_release(&err);
        return r;
}

/* --- the refresh thread ---------------------------------------------------------------------- */

/* Waits (lock held) until next_due_ms, a request or stop. */
static void wait_until(struct maas_inventory *inv, uint64_t next_due_ms)
{
        uint64_t now = clock_now_ms(inv->clock);
        struct timespec ts;

        if (now >= next_due_ms)
                return;
        clock_deadline_ts(next_due_ms - now, &ts);
        (void)pthread_cond_timedwait(&inv->cond, &inv->lock, &ts);
}

static void *refresher(void *ud)
{
        struct maas_inventory *inv = ud;
        uint64_t next_due = 0;
        int r;

        pthread_mutex_lock(&inv->lock);
        while (!inv->stop) {
                if (inv->req_seq > inv->started_seq || clock_now_ms(inv->clock) >= next_due) {
                        pthread_mutex_unlock(&inv->lock);
                        r = maas_inventory_refresh(inv);
                        pthread_mutex_lock(&inv->lock);
                        next_due = clock_now_ms(inv->clock) +
                                   (r == 0 ? inv->interval_ms : inv->retry_ms);
                        continue;
                }
                wait_until(inv, next_due);
        }
        pthread_mutex_unlock(&inv->lock);
        return NULL;
}

/* --- readers --------------------------------------------------------------------------------- */

struct maas_inventory_snapshot *maas_inventory_acquire(struct maas_inventory *inv,
                                                       enum maas_inv_state *ret_state,
                                                       char **ret_detail)
{
        struct maas_inventory_snapshot *s;
        enum maas_inv_state st;
        uint64_t age_ms = 0;
        char *detail = NULL;

        pthread_mutex_lock(&inv->lock);
        s = inv->snap;
        if (s)
                atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
        st = inv->last;
        if (st == MAAS_INV_OK && !s)
                st = MAAS_INV_NOT_LOADED;
        if (s)
                age_ms = clock_now_ms(inv->clock) - s->taken_ms;
        if (st == MAAS_INV_OK && age_ms > STALE_INTERVALS * inv->interval_ms)
                st = MAAS_INV_STALE;
        if (ret_detail && st != MAAS_INV_OK && inv->last_detail)
                detail = xstrdup(inv->last_detail);
        pthread_mutex_unlock(&inv->lock);
        if (ret_detail && st == MAAS_INV_STALE)
                detail = xasprintf("the inventory is %llu s old",
                                   (unsigned long long)(age_ms / 1000));
        if (ret_detail)
                *ret_detail = detail;
        *ret_state = st;
        return s;
}

/* Lock held. Starts a miss refresh unless one is pending or the last was too recent;
 * returns the sequence to wait for, or 0 for none. */
static uint64_t miss_target(struct maas_inventory *inv)
{
        uint64_t now = clock_now_ms(inv->clock);

        if (inv->any_miss && inv->done_seq < inv->miss_target)
                return inv->miss_target; /* one is pending: share it */
        if (inv->any_miss && now - inv->last_miss_ms < inv->miss_gap_ms)
                return 0;
        inv->any_miss = true;
        inv->last_miss_ms = now;
        inv->miss_target = ++inv->req_seq;
        pthread_cond_broadcast(&inv->cond);
        return inv->miss_target;
}

enum maas_inv_miss maas_inventory_refresh_on_miss(struct maas_inventory *inv)
{
        enum maas_inv_miss res;
        struct timespec ts;
        uint64_t target;

        pthread_mutex_lock(&inv->lock);
        target = miss_target(inv);
        if (!target) {
                pthread_mutex_unlock(&inv->lock);
                return MAAS_INV_MISS_LIMITED;
        }
        if (inv->no_thread) {
                pthread_mutex_unlock(&inv->lock);
                return maas_inventory_refresh(inv) == 0 ? MAAS_INV_MISS_REFRESHED
                                                        : MAAS_INV_MISS_FAILED;
        }
        clock_deadline_ts(inv->miss_wait_ms, &ts);
        while (inv->done_seq < target && !inv->stop)
                if (pthread_cond_timedwait(&inv->cond, &inv->lock, &ts) == ETIMEDOUT)
                        break;
        if (inv->done_seq < target)
                res = MAAS_INV_MISS_TIMEOUT;
        else
                res = inv->last == MAAS_INV_OK ? MAAS_INV_MISS_REFRESHED : MAAS_INV_MISS_FAILED;
        pthread_mutex_unlock(&inv->lock);
        return res;
}

bool maas_inventory_health(void *ud, char **ret_reason)
{
        (void)ud;
        (void)ret_reason;
        return true;
}

/* --- lifetime -------------------------------------------------------------------------------- */

static void copy_config(struct maas_inventory *inv, const struct maas_inventory_opts *o)
{
        inv->cfg.base_url = xstrdup(o->cfg->base_url);
        inv->cfg.creds.consumer_key = xstrdup(o->cfg->creds.consumer_key);
        inv->cfg.creds.token_key = xstrdup(o->cfg->creds.token_key);
        inv->cfg.creds.token_secret = xstrdup(o->cfg->creds.token_secret);
        inv->http = o->http;
        inv->ca_file = o->http.ca_file ? xstrdup(o->http.ca_file) : NULL;
        inv->http.ca_file = inv->ca_file;
        inv->interval_ms = o->interval_ms ? o->interval_ms : DEFAULT_INTERVAL_MS;
        inv->miss_wait_ms = o->miss_wait_ms ? o->miss_wait_ms : DEFAULT_MISS_WAIT_MS;
        inv->miss_gap_ms = o->miss_min_gap_ms ? o->miss_min_gap_ms : DEFAULT_MISS_GAP_MS;
        inv->retry_ms = o->retry_ms ? o->retry_ms
                                    : (inv->interval_ms < DEFAULT_RETRY_MS ? inv->interval_ms
                                                                           : DEFAULT_RETRY_MS);
        inv->budget = o->budget;
        inv->call_timeout_ms = o->call_timeout_ms ? o->call_timeout_ms : DEFAULT_CALL_MS;
        inv->clock = o->clock ? o->clock : clock_system();
        inv->no_thread = o->no_thread;
        inv->transport = o->no_thread ? o->transport : NULL;
}

static void init_sync(struct maas_inventory *inv)
{
        pthread_condattr_t ca;

        pthread_mutex_init(&inv->lock, NULL);
        pthread_mutex_init(&inv->listen_lock, NULL);
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&inv->cond, &ca);
        pthread_condattr_destroy(&ca);
}

int maas_inventory_new(const struct maas_inventory_opts *o, struct maas_inventory **ret)
{
        struct maas_inventory *inv;
        int r = CM_OK;

        if (!o || !o->cfg || !o->cfg->base_url || !o->cfg->creds.consumer_key ||
            !o->cfg->creds.token_key || !o->cfg->creds.token_secret)
                return CM_EINVAL;
        inv = xcalloc(1, sizeof(*inv));
        init_sync(inv);
        copy_config(inv, o);
        inv->last = MAAS_INV_NOT_LOADED;
        if (o->metrics)
                r = register_metrics(inv, o->metrics);
        if (r == 0 && !inv->no_thread) {
                r = pthread_create(&inv->thread, NULL, refresher, inv) == 0 ? CM_OK : CM_EIO;
                inv->has_thread = r == 0;
        }
        if (r < 0) {
                maas_inventory_free(inv);
                return r;
        }
        *ret = inv;
        return CM_OK;
}

struct maas_inventory *maas_inventory_free(struct maas_inventory *inv)
{
        if (!inv)
                return NULL;
        pthread_mutex_lock(&inv->lock);
        inv->stop = true;
        pthread_cond_broadcast(&inv->cond);
        pthread_mutex_unlock(&inv->lock);
        if (inv->has_thread)
                pthread_join(inv->thread, NULL);
        maas_client_free(inv->client);
        if (inv->own_transport)
                http_transport_free(inv->transport);
        maas_inventory_snapshot_release(inv->snap);
        free(inv->last_detail);
        free(inv->ca_file);
        maas_config_release(&inv->cfg);
        pthread_cond_destroy(&inv->cond);
        pthread_mutex_destroy(&inv->listen_lock);
        pthread_mutex_destroy(&inv->lock);
        free(inv);
        return NULL;
}
