/*
 * reconciler: small pieces shared by the reconcilers: in-memory tables, CAPI object lookups
 * in the informer caches, MAAS call accounting and the workload-cluster client.
 */
#include "reconciler.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "clock.h"
#include "err.h"
#include "kube_events.h"
#include "memfile.h"
#include "metrics.h"
#include "patch_helper.h"
#include "rfc3339.h"
#include "worker.h"
#include "xalloc.h"

uint64_t reconciler_digest(const char *s, size_t n)
{
        uint64_t h = 14695981039346656037ULL;

        for (size_t i = 0; i < n; i++) {
                h ^= (unsigned char)s[i];
                h *= 1099511628211ULL;
        }
        return h;
}

static size_t key_hash(const char *key)
{
        return (size_t)reconciler_digest(key, strlen(key));
}

/* The slot holding key, or the empty slot where it would go. */
static size_t table_slot(const struct reconciler_table *t, const char *key)
{
        size_t mask = t->n_slots - 1, i = key_hash(key) & mask;

        while (t->slots[i] && strcmp(t->items[t->slots[i] - 1].key, key) != 0)
                i = (i + 1) & mask;
        return i;
}

static void table_reindex(struct reconciler_table *t, size_t n_slots)
{
        free(t->slots);
        t->n_slots = n_slots;
        t->slots = xcalloc(n_slots, sizeof(*t->slots));
        for (size_t k = 0; k < t->n; k++)
                t->slots[table_slot(t, t->items[k].key)] = k + 1;
}

struct reconciler_entry *reconciler_table_get(struct reconciler_table *t, const char *key)
{
        size_t i;

        if (!t->n_slots)
                return NULL;
        i = table_slot(t, key);
        return t->slots[i] ? &t->items[t->slots[i] - 1] : NULL;
}

struct reconciler_entry *reconciler_table_put(struct reconciler_table *t, const char *key)
{
        struct reconciler_entry *e = reconciler_table_get(t, key);

        if (e)
                return e;
        if (t->n == t->cap) {
                t->cap = t->cap ? t->cap * 2 : 16;
                t->items = xrealloc(t->items, t->cap * sizeof(*t->items));
                table_reindex(t, t->cap * 2);
        }
        e = &t->items[t->n++];
        *e = (struct reconciler_entry){ .key = xstrdup(key) };
        t->slots[table_slot(t, key)] = t->n;
        return e;
}

/* Empties slot i, moving back the entries after it whose probe passed it (Knuth's
 * deletion for linear probing: no tombstones). */
static void table_unslot(struct reconciler_table *t, size_t i)
{
        size_t mask = t->n_slots - 1, j = i;

        t->slots[i] = 0;
        for (;;) {
                size_t k;
                bool stays;

                j = (j + 1) & mask;
                if (!t->slots[j])
                        return;
                k = key_hash(t->items[t->slots[j] - 1].key) & mask;
                /* an entry whose home lies cyclically in (i, j] is still reachable */
                stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
                if (stays)
                        continue;
                t->slots[i] = t->slots[j];
                t->slots[j] = 0;
                i = j;
        }
}

void reconciler_table_del(struct reconciler_table *t, const char *key)
{
        size_t i, k, last;

        if (!t->n_slots)
                return;
        i = table_slot(t, key);
        if (!t->slots[i])
                return;
        k = t->slots[i] - 1;
        table_unslot(t, i);
        free(t->items[k].key);
        last = t->n - 1;
        if (k != last) { /* the last item fills the hole: its slot follows it */
                t->slots[table_slot(t, t->items[last].key)] = k + 1;
                t->items[k] = t->items[last];
        }
        t->n--;
}

void reconciler_table_release(struct reconciler_table *t)
{
        for (size_t i = 0; i < t->n; i++)
                free(t->items[i].key);
        free(t->items);
        free(t->slots);
        *t = (struct reconciler_table){ 0 };
}

static void dns_copy(const struct maas_dns_resource *src, struct maas_dns_resource *dst)
{
        *dst = (struct maas_dns_resource){ .id = src->id,
                                           .fqdn = src->fqdn ? xstrdup(src->fqdn) : NULL,
                                           .address_ttl = src->address_ttl,
                                           .ips = { .n = src->ips.n } };
        dst->ips.v = src->ips.n ? xcalloc(src->ips.n, sizeof(char *)) : NULL;
        for (size_t i = 0; i < src->ips.n; i++)
                dst->ips.v[i] = xstrdup(src->ips.v[i]);
}

static void dns_free(void *ptr)
{
        struct maas_dns_resource *d = ptr;

        if (d) {
                maas_dns_resource_release(d);
                free(d);
        }
}

bool reconciler_dns_cached(struct provider *p, const char *fqdn, struct maas_dns_resource *ret)
{
        struct reconciler_entry *e;
        bool hit = false;

        pthread_mutex_lock(&p->lock);
        e = reconciler_table_get(&p->dns_records, fqdn);
        if (e && e->ptr &&
            clock_now_ms(p->clock) - (uint64_t)e->a < p->settings.machine_refresh_ms) {
                dns_copy(e->ptr, ret);
                hit = true;
        }
        pthread_mutex_unlock(&p->lock);
        return hit;
}

void reconciler_dns_remember(struct provider *p,
                             const char *fqdn,
                             const struct maas_dns_resource *rec)
{
        struct maas_dns_resource *copy = NULL;
        struct reconciler_entry *e;

        if (rec) {
                copy = xmalloc(sizeof(*copy));
                dns_copy(rec, copy);
        }
        pthread_mutex_lock(&p->lock);
        if (copy) {
                e = reconciler_table_put(&p->dns_records, fqdn);
                dns_free(e->ptr);
                e->ptr = copy;
                e->a = (int64_t)clock_now_ms(p->clock);
        } else if ((e = reconciler_table_get(&p->dns_records, fqdn)) != NULL) {
                dns_free(e->ptr);
                reconciler_table_del(&p->dns_records, fqdn);
        }
        pthread_mutex_unlock(&p->lock);
}

void reconciler_dns_forget_all(struct provider *p)
{
        for (size_t i = 0; i < p->dns_records.n; i++)
                dns_free(p->dns_records.items[i].ptr);
        reconciler_table_release(&p->dns_records);
}

struct kube_object *reconciler_owner(struct provider *p,
                                     const struct schema_meta *meta,
                                     const char *kind)
{
        const struct schema_owner_ref *o = schema_meta_owner(meta, RECONCILER_CAPI_GROUP, kind);
        struct informer *inf = strcmp(kind, "Cluster") == 0 ? p->clusters : p->machines;

        if (!o || !o->name)
                return NULL;
        return informer_get(inf, meta->namespace ? meta->namespace : "", o->name);
}

struct kube_object *reconciler_cluster_of(struct provider *p, const char *ns, const cJSON *obj)
{
        const char *name =
                json_find_str(obj, "metadata", "labels", SCHEMA_LABEL_CLUSTER_NAME, NULL);

        if (!name || !*name)
                return NULL;
        return informer_get(p->clusters, ns, name);
}

const char *reconciler_pause_cause(const cJSON *cluster, const cJSON *obj)
{
        if (cluster && capi_cluster_paused(cluster))
                return "the Cluster's spec.paused is true";
        if (cluster &&
            json_find_str(cluster, "metadata", "annotations", SCHEMA_ANNOTATION_PAUSED, NULL))
                return "the Cluster carries the " SCHEMA_ANNOTATION_PAUSED " annotation";
        if (obj && json_find_str(obj, "metadata", "annotations", SCHEMA_ANNOTATION_PAUSED, NULL))
                return "the object carries the " SCHEMA_ANNOTATION_PAUSED " annotation";
        return NULL;
}

bool reconciler_pause_condition(const struct reconciler_conditions *at,
                                const cJSON *cluster,
                                const cJSON *obj)
{
        const char *cause = reconciler_pause_cause(cluster, obj);

        if (cause)
                reconciler_cond(at, SCHEMA_COND_PAUSED, SCHEMA_CONDITION_TRUE, SCHEMA_REASON_PAUSED,
                                "%s", cause);
        else
                reconciler_cond(at, SCHEMA_COND_PAUSED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_NOT_PAUSED, NULL);
        return cause != NULL;
}

bool reconciler_externally_managed(const cJSON *obj)
{
        return json_find(obj, "metadata", "annotations", SCHEMA_ANNOTATION_MANAGED_BY, NULL) !=
               NULL;
}

bool reconciler_sleep(struct provider *p, uint64_t ms)
{
        struct timespec ts = { 0, 0 };

        while (ms > 0 && !atomic_load(&p->stopping)) {
                uint64_t step = ms < 50 ? ms : 50;

                ts.tv_nsec = (long)step * 1000000L;
                (void)nanosleep(&ts, NULL);
                ms -= step;
        }
        return !atomic_load(&p->stopping);
}

int64_t reconciler_parse_time(const char *s)
{
        char *end = NULL;
        long long v;

        if (s && *s >= '0' && *s <= '9') {
                v = strtoll(s, &end, 10);
                if (end && *end == '\0')
                        return v;
        }
        return rfc3339_parse(s);
}

void reconciler_observe_phase(struct provider *p, const char *phase, const char *since, time_t now)
{
        int64_t t0 = reconciler_parse_time(since);

        if (!p->phase_seconds || t0 < 0 || now < t0)
                return;
        metric_histogram_observe(metric_series(p->phase_seconds, phase), (double)(now - t0));
}

static void set_condition(const struct reconciler_conditions *at,
                          const struct schema_condition_in *in)
{
        (void)schema_conditions_set(at->list, in, *at->generation, *at->now);
}

void reconciler_cond(const struct reconciler_conditions *at,
                     const char *type,
                     const char *status,
                     const char *reason,
                     const char *fmt,
                     ...)
{
        char msg[512] = "";
        va_list ap;

        va_start(ap, fmt);
        if (fmt)
                (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        *at->status_present = true;
        set_condition(at,
                      &(struct schema_condition_in){
                              .type = type, .status = status, .reason = reason, .message = msg });
}

void reconciler_event(struct provider *p,
                      const cJSON *obj,
                      const char *type,
                      const char *reason,
                      const char *fmt,
                      ...)
{
        char msg[1024];
        va_list ap;

        if (!p->events)
                return;
        va_start(ap, fmt);
        (void)vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        event_record(p->events, obj, type, reason, "%s", msg);
}

void reconciler_ready_summary(const struct reconciler_conditions *at,
                              const char *const *types,
                              size_t n)
{
        struct schema_condition_in ready = { .type = SCHEMA_COND_READY,
                                             .status = SCHEMA_CONDITION_TRUE,
                                             .reason = "Ready",
                                             .message = "" };
        const struct schema_condition *bad = NULL;
        bool unknown = false;
        char msg[512];

        for (size_t i = 0; i < n; i++) {
                const struct schema_condition *k = schema_conditions_find(at->list, types[i]);

                if (!k || strcmp(k->status, SCHEMA_CONDITION_UNKNOWN) == 0)
                        unknown = true;
                else if (strcmp(k->status, SCHEMA_CONDITION_FALSE) == 0 && !bad)
                        bad = k;
        }
        if (bad) {
                (void)snprintf(msg, sizeof(msg), "%s: %s", bad->type,
                               bad->message ? bad->message : "");
                ready = (struct schema_condition_in){ .type = SCHEMA_COND_READY,
                                                      .status = SCHEMA_CONDITION_FALSE,
                                                      .reason = bad->reason,
                                                      .message = msg };
        } else if (unknown) {
                ready = (struct schema_condition_in){ .type = SCHEMA_COND_READY,
                                                      .status = SCHEMA_CONDITION_UNKNOWN,
                                                      .reason = "NotYetReported",
                                                      .message = "Condition not yet reported" };
        }
        set_condition(at, &ready); /* status.present is the caller's: a summary adds nothing */
}

/* Replaces after's status by cur's, so a patch computed between them leaves status alone. */
static void keep_status(cJSON *after, const cJSON *cur)
{
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(cur, "status");

        cJSON_DeleteItemFromObjectCaseSensitive(after, "status");
        if (st)
                cJSON_AddItemToObject(after, "status", cJSON_Duplicate(st, true));
}

int reconciler_write(struct reconciler_worker *w,
                     const struct kube_resource *r,
                     cJSON **cur,
                     cJSON *after,
                     bool metadata_only,
                     unsigned *ret_writes)
{
        int err;

        if (metadata_only)
                keep_status(after, *cur);
        err = patch_helper_write(w->kube, r, *cur, after, NULL, ret_writes, NULL);
        if (err == 0) {
                cJSON_Delete(*cur);
                *cur = after;
                after = NULL;
        }
        cJSON_Delete(after);
        return err;
}

static const char *maas_code(int rc, const struct maas_error *e)
{
        static const char *const codes[] = { "200", "400", "401", "403",  "404",
                                             "409", "500", "503", "error" };

        if (rc == 0)
                return codes[0];
        if (!e || e->http_status == 0)
                return codes[8];
        switch (e->http_status) {
        case 400:
                return codes[1];
        case 401:
                return codes[2];
        case 403:
                return codes[3];
        case 404:
                return codes[4];
        case 409:
                return codes[5];
        case 503:
                return codes[7];
        default:
                return e->http_status >= 500 ? codes[6] : codes[8];
        }
}

void reconciler_maas_count(struct provider *p, const char *op, int rc, const struct maas_error *e)
{
        if (!p->maas_requests)
                return;
        metric_counter_inc(metric_series(p->maas_requests, op, maas_code(rc, e)));
}

void reconciler_deploy_failed(struct provider *p, const char *reason)
{
        if (p->deploy_failures)
                metric_counter_inc(metric_series(p->deploy_failures, reason));
}

int reconciler_metrics_zero(struct provider *p)
{
        static const struct {
                const char *reason;
                bool replaced; /* a refused deploy is rolled back, not replaced */
        } reasons[] = { { RECONCILER_DEPLOY_FAILED, true },
                        { RECONCILER_DEPLOY_TIMEOUT, true },
                        { RECONCILER_DEPLOY_REFUSED, false } };
        struct metric_series *s;
        int err = 0;

        for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]) && err == 0; i++) {
                const char *const v[] = { reasons[i].reason, NULL };

                err = metric_series_get(p->deploy_failures, v, &s);
                if (err == 0 && reasons[i].replaced)
                        err = metric_series_get(p->replaced, v, &s);
        }
        return err;
}

/* The kubeconfig bytes of the <cluster>-kubeconfig Secret (key "value", base64). */
static int workload_kubeconfig(struct reconciler_worker *w,
                               const char *ns,
                               const char *cluster,
                               char **ret,
                               size_t *ret_len)
{
        char *name = xasprintf("%s-kubeconfig", cluster);
        cJSON *secret = NULL;
        const char *b64;
        int err;

        err = kube_get(w->kube, &KUBE_RES_SECRETS, ns, name, &secret, NULL);
        if (err)
                goto out;
        b64 = json_find_str(secret, "data", "value", NULL);
        if (!b64) {
                err = CM_ENOTFOUND;
                goto out;
        }
        err = base64_decode(b64, strlen(b64), (unsigned char **)ret, ret_len);
out:
        cJSON_Delete(secret);
        free(name);
        return err;
}

#define WORKLOAD_RECHECK_MS 30000

void reconciler_workload_conn_release(struct workload_conn *c)
{
        kube_client_free(c->client);
        kube_config_release(&c->cfg);
        free(c->key);
        *c = (struct workload_conn){ 0 };
}

/* The kept slot of key, else the free or least recently used one (released). */
static struct workload_conn *workload_slot(struct reconciler_worker *w, const char *key)
{
        struct workload_conn *lru = &w->workload[0];

        for (size_t i = 0; i < WORKLOAD_CONNS; i++) {
                struct workload_conn *c = &w->workload[i];

                if (c->key && strcmp(c->key, key) == 0)
                        return c;
                if (!c->key || (lru->key && c->used < lru->used))
                        lru = c;
        }
        reconciler_workload_conn_release(lru);
        return lru;
}

/* A new client from the kubeconfig text into c (released on failure). */
static int workload_build(struct reconciler_worker *w,
                          struct workload_conn *c,
                          const char *yaml,
                          size_t len)
{
        struct memfile kubeconfig = { .fd = -1 };
        char *msg = NULL;
        int err;

        /* loaded from memory: the workload cluster's client key never touches a disk */
        err = memfile_open(&kubeconfig, "workload-kubeconfig", yaml, len);
        if (err == 0)
                err = kube_config_from_kubeconfig(kubeconfig.path, NULL, &c->cfg, &msg);
        memfile_close(&kubeconfig);
        free(msg);
        if (err == 0)
                err = kube_client_new(
                        &(struct kube_client_opts){ .config = &c->cfg,
                                                    .timeout_ms = 10000,
                                                    .transport = w->workload_transport },
                        &c->client);
        if (err)
                reconciler_workload_conn_release(c);
        return err;
}

int reconciler_workload_client(struct reconciler_worker *w,
                               const char *ns,
                               const char *cluster,
                               struct kube_client **ret)
{
        char *key = xasprintf("%s/%s", ns, cluster);
        struct workload_conn *c = workload_slot(w, key);
        uint64_t now = clock_now_ms(w->p->clock), d;
        char *yaml = NULL;
        size_t len = 0;
        int err = 0;

        if (c->client && now - c->checked_ms < WORKLOAD_RECHECK_MS)
                goto found;
        err = workload_kubeconfig(w, ns, cluster, &yaml, &len);
        if (err) {
                reconciler_workload_conn_release(c);
                goto out;
        }
        d = reconciler_digest(yaml, len);
        if (!c->client || c->digest != d) {
                reconciler_workload_conn_release(c);
                err = workload_build(w, c, yaml, len);
                if (err)
                        goto out;
                c->key = key;
                key = NULL;
                c->digest = d;
        }
        c->checked_ms = now;
found:
        c->used = ++w->workload_uses;
        *ret = c->client;
out:
        free(yaml);
        free(key);
        return err;
}

void reconciler_workload_drop(struct reconciler_worker *w, const char *ns, const char *cluster)
{
        char *key = xasprintf("%s/%s", ns, cluster);

        for (size_t i = 0; i < WORKLOAD_CONNS; i++)
                if (w->workload[i].key && strcmp(w->workload[i].key, key) == 0)
                        reconciler_workload_conn_release(&w->workload[i]);
        free(key);
}
