/*
 * informer: list+watch cache of one resource kind (client-go's reflector, DeltaFIFO and
 * indexer folded into one thread and one table).
 *
 * Design: the cache is a chained hash table of entries keyed by namespace/name. An entry is
 * one allocation holding the object as compact JSON text (without managedFields) and the
 * namespace, name, resourceVersion and cluster label it is indexed by: about 2.3 KiB for a
 * typical MaasMachine, against ~14 KiB as a cJSON tree (64-byte nodes plus a malloc per key
 * and per string). Readers get a fresh kube_object parsed from the text (informer_get/list, and
 * the handlers' old objects and replays): a few microseconds per KiB, paid only for the
 * objects a reconcile actually reads. A second set of chains over the same entries,
 * keyed by the cluster-name label, is the cluster index (an entry is linked there only when
 * the label is present). Both sets share one bucket count and grow together (load factor
 * 1). One rwlock guards the table: the watch thread writes, any thread reads.
 *
 * Every change is applied under the write lock and produces events (add, update, delete)
 * that carry their own kube_object references (the new object is the tree the API delivered, so
 * it is never re-parsed); the lock is dropped before the handlers run, so a
 * handler may call informer_get/informer_list. A relist (start-up, 410 Gone) marks every
 * listed entry with a new epoch and then sweeps the unmarked ones out as deletes; it is
 * applied and dispatched page by page, so it never holds more than one page as trees.
 *
 * The watch thread owns its kube_client, the last seen resourceVersion (lists, events and
 * bookmarks move it) and the reconnect backoff (1 s → 30 s, full jitter in [d/2, d]).
 * Resync replays the cache as updates (old == new) on the injected clock; the watch is given
 * a server-side timeout that ends it by the next resync when no event arrives sooner.
 */
#include "informer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "err.h"
#include "informer_priv.h"
#include "informer_store.h"
#include "kube_client.h"
#include "log.h"
#include "xalloc.h"

#define MAX_HANDLERS        8
#define RECONNECT_BASE_MS   1000
#define RECONNECT_MAX_MS    30000
#define MAX_FAILURES        16   /* stops the backoff exponent growing once capped */
#define WATCH_MIN_TIMEOUT_S 300  /* client-go: a random watch timeout in [5, 10) minutes */
#define QUICK_WATCH_MS      1000 /* an empty watch shorter than this counts as a failure */
#define LOG_EVERY_FAILURES  10
#define QUICK_CLOSE         (CM_ERR_MIN - 1) /* do_watch only: closed at once, no event */

struct informer {
        const struct kube_resource *resource; /* borrowed */
        const struct kube_config *config;     /* borrowed */
        struct token_bucket *limiter;         /* borrowed */
        const struct clock_ops *clock;        /* borrowed */
        char *ns;                             /* owned; NULL = all namespaces */
        char *selector;                       /* owned; NULL = none */
        char *user_agent;                     /* owned; NULL = the client's default */
        uint64_t resync_ms;
        struct informer_handler handlers[MAX_HANDLERS];
        size_t n_handlers;
        struct store store;

        pthread_mutex_t mu; /* guards synced transitions and the sleeps */
        pthread_cond_t cond;
        atomic_bool stop;
        atomic_bool synced;
        pthread_t thread;
        bool started;
        bool joined;

        /* watch thread only (or the feed_* caller in tests) */
        struct kube_client *client; /* owned */
        char *rv;                   /* owned; last seen resourceVersion, NULL = none */
        uint64_t next_resync_ms;
        uint64_t rng;
        unsigned failures;    /* consecutive failures (capped: the backoff exponent) */
        unsigned long streak; /* consecutive failures (uncapped: for logging) */
        unsigned gone;        /* consecutive 410s */
        size_t watch_events;
        _Atomic uint64_t api_calls;
        _Atomic uint64_t list_calls;
};

/* ---- events to handlers ---- */

static void call_handler(const struct informer_handler *h, const struct ev *e)
{
        switch (e->type) {
        case EV_ADD:
                if (h->on_add)
                        h->on_add(h->arg, e->cur);
                break;
        case EV_UPDATE:
                if (h->on_update)
                        h->on_update(h->arg, e->old ? e->old : e->cur, e->cur);
                break;
        case EV_DELETE:
                if (h->on_delete)
                        h->on_delete(h->arg, e->cur);
                break;
        }
}

/* Runs the handlers for every event in order (no lock held), then frees the events. */
static void dispatch(struct informer *inf, struct evlist *l)
{
        for (size_t i = 0; i < l->n; i++) {
                for (size_t j = 0; l->v[i].cur && j < inf->n_handlers; j++)
                        call_handler(&inf->handlers[j], &l->v[i]);
                kube_object_unref(l->v[i].old);
                kube_object_unref(l->v[i].cur);
        }
        free(l->v);
        *l = (struct evlist){ 0 };
}

/* ---- applying what the API delivers ---- */

static void set_rv(struct informer *inf, const char *rv)
{
        if (!rv || !*rv)
                return;
        free(inf->rv);
        inf->rv = xstrdup(rv);
}

/* managedFields are never read by a controller and are often the largest part of an
 * object; the cache drops them (controller-runtime users do the same with a transform). */
static void strip(cJSON *obj)
{
        cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

        if (cJSON_IsObject(md))
                cJSON_DeleteItemFromObjectCaseSensitive(md, "managedFields");
}

static const char *meta_rv(const cJSON *obj)
{
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");

        return cJSON_IsString(rv) ? rv->valuestring : NULL;
}

int informer_feed_event(struct informer *inf, enum kube_watch_event type, cJSON *obj)
{
        struct evlist l = { 0 };
        struct entry *e = NULL;
        struct kube_object *o;
        int r;

        if (type == KUBE_WATCH_BOOKMARK) {
                set_rv(inf, meta_rv(obj));
                cJSON_Delete(obj);
                return 0;
        }
        strip(obj);
        r = kube_object_new(obj, &o);
        if (r < 0)
                return r;
        set_rv(inf, kube_object_resource_version(o));
        if (type != KUBE_WATCH_DELETED)
                e = informer_entry_new(o, 0); /* printing takes longer than the update: unlocked */
        (void)pthread_rwlock_wrlock(&inf->store.lock);
        if (e)
                informer_store_put(&inf->store, o, e, &l);
        else
                informer_store_del(&inf->store, o, &l);
        (void)pthread_rwlock_unlock(&inf->store.lock);
        dispatch(inf, &l);
        return 0;
}

/* Detaches list.items into kube_objects (items without a name are skipped). */
/* One page of a list as snapshots (owned references); the page's tree is freed first. */
struct gathered {
        struct kube_object **objs;
        size_t n, cap;
};

static void gathered_release(struct gathered *g)
{
        for (size_t i = 0; i < g->n; i++)
                kube_object_unref(g->objs[i]);
        free(g->objs);
        *g = (struct gathered){ 0 };
}

/* Takes list's items as snapshots and frees list. */
static void gather(struct gathered *g, cJSON *list)
{
        cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items");
        cJSON *it;

        while (cJSON_IsArray(items) && (it = cJSON_DetachItemFromArray(items, 0))) {
                if (g->n == g->cap) {
                        g->cap = g->cap ? g->cap * 2 : 64;
                        g->objs = xrealloc(g->objs, g->cap * sizeof(*g->objs));
                }
                strip(it);
                if (kube_object_new(it, &g->objs[g->n]) == 0)
                        g->n++;
        }
        cJSON_Delete(list);
}

static void mark_synced(struct informer *inf)
{
        if (atomic_load(&inf->synced))
                return;
        inf->next_resync_ms = clock_now_ms(inf->clock) + inf->resync_ms;
        (void)pthread_mutex_lock(&inf->mu);
        atomic_store(&inf->synced, true);
        (void)pthread_cond_broadcast(&inf->cond);
        (void)pthread_mutex_unlock(&inf->mu);
}

/* Stores one page of a relist (the store's epoch already moved on) and tells the handlers
 * at once, so the page's trees are freed before the next page arrives: a relist of 10 000
 * objects holds one page of trees, not 10 000. */
static void relist_page(struct informer *inf, cJSON *page)
{
        struct gathered g = { 0 };
        struct evlist l = { 0 };

        gather(&g, page);
        (void)pthread_rwlock_wrlock(&inf->store.lock);
        informer_store_mark(&inf->store, g.objs, g.n, &l);
        (void)pthread_rwlock_unlock(&inf->store.lock);
        g.n = 0; /* the store and the events hold the references now */
        gathered_release(&g);
        dispatch(inf, &l);
}

/* Ends a relist: what it did not see is deleted; rv is the list's resourceVersion. */
static void relist_end(struct informer *inf, const char *rv)
{
        struct evlist l = { 0 };

        set_rv(inf, rv);
        (void)pthread_rwlock_wrlock(&inf->store.lock);
        informer_store_sweep(&inf->store, &l);
        (void)pthread_rwlock_unlock(&inf->store.lock);
        dispatch(inf, &l);
        mark_synced(inf);
}

static void relist_begin(struct informer *inf)
{
        (void)pthread_rwlock_wrlock(&inf->store.lock);
        inf->store.epoch++;
        (void)pthread_rwlock_unlock(&inf->store.lock);
}

int informer_feed_list(struct informer *inf, cJSON *list)
{
        const char *list_rv;
        char *rv;

        if (!cJSON_IsObject(list)) {
                cJSON_Delete(list);
                return CM_EINVAL;
        }
        list_rv = meta_rv(list);
        rv = list_rv ? xstrdup(list_rv) : NULL;
        relist_begin(inf);
        relist_page(inf, list);
        relist_end(inf, rv);
        free(rv);
        return 0;
}

/* Replays the cache one object at a time, so a resync of a large cache never holds more
 * than one parsed object. Objects deleted meanwhile are skipped. */
size_t informer_resync_if_due(struct informer *inf)
{
        struct collect c = { .keys = true };
        uint64_t now = clock_now_ms(inf->clock);
        size_t done = 0;

        if (!inf->resync_ms || !atomic_load(&inf->synced) || now < inf->next_resync_ms)
                return 0;
        inf->next_resync_ms = now + inf->resync_ms;
        informer_store_collect(&inf->store, &c);
        for (size_t i = 0; i < c.n; i++) {
                struct evlist l = { 0 };
                struct kube_object *o = informer_get(inf, c.key[i], informer_key_name(c.key[i]));

                free(c.key[i]);
                if (!o)
                        continue;
                informer_evlist_push(&l, EV_UPDATE, NULL, o);
                dispatch(inf, &l);
                done++;
        }
        free(c.key);
        return done;
}

const char *informer_last_rv(struct informer *inf)
{
        return inf->rv ? inf->rv : "";
}

uint64_t informer_api_calls(struct informer *inf)
{
        return atomic_load(&inf->api_calls);
}

uint64_t informer_list_calls(struct informer *inf)
{
        return atomic_load(&inf->list_calls);
}

size_t informer_cache_bytes(struct informer *inf)
{
        size_t n;

        (void)pthread_rwlock_rdlock(&inf->store.lock);
        n = inf->store.bytes;
        (void)pthread_rwlock_unlock(&inf->store.lock);
        return n;
}

/* ---- the watch thread ---- */

static uint64_t next_rand(struct informer *inf)
{
        uint64_t x = inf->rng; /* xorshift64 */

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        inf->rng = x;
        return x;
}

/* Sleeps ms of real time, or until informer_stop. */
static void sleep_ms(struct informer *inf, uint64_t ms)
{
        struct timespec ts;

        clock_deadline_ts(ms, &ts);
        (void)pthread_mutex_lock(&inf->mu);
        while (!atomic_load(&inf->stop))
                if (pthread_cond_timedwait(&inf->cond, &inf->mu, &ts) != 0)
                        break;
        (void)pthread_mutex_unlock(&inf->mu);
}

static void backoff_sleep(struct informer *inf, const char *what, const char *err)
{
        static const struct backoff_policy policy = { RECONNECT_BASE_MS, RECONNECT_MAX_MS };
        uint64_t d = backoff_jittered_ms(&policy, inf->failures, next_rand(inf));

        /* a failure that repeats is logged once per LOG_EVERY_FAILURES, with its count */
        if (inf->streak++ % LOG_EVERY_FAILURES == 0)
                log_warn("informer", "retrying",
                         "resource=%s op=%s err=%s failures=%lu delay_ms=%llu",
                         inf->resource->plural, what, err, inf->streak, (unsigned long long)d);
        if (inf->failures < MAX_FAILURES)
                inf->failures++;
        sleep_ms(inf, d);
}

static int make_client(struct informer *inf)
{
        struct kube_client_opts o = { .config = inf->config,
                                      .limiter = inf->limiter,
                                      .user_agent = inf->user_agent };

        if (inf->client)
                return 0;
        return kube_client_new(&o, &inf->client);
}

struct relist {
        struct informer *inf;
        char *rv; /* the first page's resourceVersion */
};

/* kube_page_fn for do_list. After an expired continue token the second pass marks the
 * same epoch: what the first pass stored stays, updated where it changed since. */
static int on_relist_page(void *arg, cJSON *page, bool first, bool restart)
{
        struct relist *r = arg;
        const char *rv = meta_rv(page);

        (void)restart;
        if (first) {
                free(r->rv);
                r->rv = rv ? xstrdup(rv) : NULL;
        }
        relist_page(r->inf, page);
        return 0;
}

static int do_list(struct informer *inf)
{
        struct kube_list_opts lo = { .label_selector = inf->selector };
        struct kube_error e = { 0 };
        struct relist rl = { .inf = inf };
        int r;

        atomic_fetch_add(&inf->api_calls, 1);
        atomic_fetch_add(&inf->list_calls, 1);
        relist_begin(inf);
        r = kube_list_pages(inf->client, inf->resource, inf->ns, &lo, on_relist_page, &rl, &e);
        if (r < 0)
                log_debug("informer", "list failed", "resource=%s err=%s message=%s",
                          inf->resource->plural, cm_strerror(r), e.message ? e.message : "");
        else
                relist_end(inf, rl.rv);
        kube_error_release(&e);
        free(rl.rv);
        return r;
}

static int watch_cb(void *arg, enum kube_watch_event type, cJSON *object)
{
        struct informer *inf = arg;

        if (informer_feed_event(inf, type, object) < 0)
                log_debug("informer", "skipped event without a name", "resource=%s",
                          inf->resource->plural);
        inf->watch_events++;
        (void)informer_resync_if_due(inf);
        return atomic_load(&inf->stop) ? 1 : 0;
}

/* client-go's random [5, 10) minute timeout, shortened to end by the next resync. */
static unsigned watch_timeout_s(struct informer *inf)
{
        uint64_t t = WATCH_MIN_TIMEOUT_S + next_rand(inf) % WATCH_MIN_TIMEOUT_S;
        uint64_t now = clock_now_ms(inf->clock);

        if (inf->resync_ms) {
                uint64_t left = inf->next_resync_ms > now ? inf->next_resync_ms - now : 0;
                uint64_t s = (left + 999) / 1000;

                if (s < t)
                        t = s ? s : 1;
        }
        return (unsigned)t;
}

/* One watch from the last resourceVersion. QUICK_CLOSE for a quick empty end. */
static int do_watch(struct informer *inf)
{
        struct kube_watch_opts wo = { .label_selector = inf->selector, .stop = &inf->stop };
        struct kube_error e = { 0 };
        char *rv = inf->rv ? xstrdup(inf->rv) : NULL;
        uint64_t t0 = clock_now_ms(NULL);
        int r;

        wo.resource_version = rv;
        wo.timeout_seconds = watch_timeout_s(inf);
        inf->watch_events = 0;
        atomic_fetch_add(&inf->api_calls, 1);
        r = kube_watch(inf->client, inf->resource, inf->ns, &wo, watch_cb, inf, &e);
        if (r < 0 && r != CM_EGONE)
                log_debug("informer", "watch ended", "resource=%s err=%s message=%s",
                          inf->resource->plural, cm_strerror(r), e.message ? e.message : "");
        kube_error_release(&e);
        free(rv);
        if (atomic_load(&inf->stop))
                return 0; /* an aborted stream may look like a transport error */
        if (r == 0 && !inf->watch_events && !atomic_load(&inf->stop) &&
            clock_now_ms(NULL) - t0 < QUICK_WATCH_MS)
                r = QUICK_CLOSE;
        return r;
}

static void reset_failures(struct informer *inf)
{
        inf->failures = 0;
        inf->streak = 0;
}

/* Acts on how a watch ended; returns true when the next step must relist. */
static bool after_watch(struct informer *inf, int r)
{
        if (r == CM_EGONE) {
                /* our resourceVersion was compacted: relist at once, unless the fresh list's
                 * version expired too (then back off instead of hammering the server) */
                log_info("informer", "resourceVersion expired, relisting", "resource=%s rv=%s",
                         inf->resource->plural, informer_last_rv(inf));
                if (inf->watch_events)
                        inf->gone = 0;
                if (inf->gone++ > 0)
                        backoff_sleep(inf, "watch", cm_strerror(r));
                return true;
        }
        if (r == QUICK_CLOSE)
                backoff_sleep(inf, "watch", "closed at once without events");
        else if (r < 0)
                backoff_sleep(inf, "watch", cm_strerror(r));
        else
                inf->gone = 0;
        if (r == 0)
                reset_failures(inf);
        return false;
}

/* One step of the loop; *need_list says whether the next step lists. */
static void step(struct informer *inf, bool *need_list)
{
        int r = make_client(inf);

        if (r < 0) {
                backoff_sleep(inf, "client", cm_strerror(r));
                return;
        }
        if (*need_list) {
                r = do_list(inf);
                if (r < 0) {
                        if (!atomic_load(&inf->stop))
                                backoff_sleep(inf, "list", cm_strerror(r));
                        return;
                }
                *need_list = false;
                reset_failures(inf);
        }
        (void)informer_resync_if_due(inf);
        r = do_watch(inf);
        (void)informer_resync_if_due(inf);
        *need_list = after_watch(inf, r);
}

static void *informer_thread(void *arg)
{
        struct informer *inf = arg;
        bool need_list = true;

        while (!atomic_load(&inf->stop))
                step(inf, &need_list);
        inf->client = kube_client_free(inf->client);
        return NULL;
}

/* ---- public API ---- */

int informer_new(const struct informer_opts *o, struct informer **ret)
{
        pthread_condattr_t ca;
        struct informer *inf;

        if (!o || !o->resource)
                return CM_EINVAL;
        inf = xcalloc(1, sizeof(*inf));
        inf->resource = o->resource;
        inf->config = o->config;
        inf->limiter = o->limiter;
        inf->clock = o->clock;
        inf->ns = o->namespace && *o->namespace ? xstrdup(o->namespace) : NULL;
        inf->selector = o->label_selector && *o->label_selector ? xstrdup(o->label_selector) : NULL;
        inf->user_agent = o->user_agent ? xstrdup(o->user_agent) : NULL;
        inf->resync_ms = o->resync_ms;
        inf->rng = (clock_now_ms(NULL) ^ (uint64_t)(uintptr_t)inf) | 1;
        informer_store_init(&inf->store);
        (void)pthread_mutex_init(&inf->mu, NULL);
        (void)pthread_condattr_init(&ca);
        (void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        (void)pthread_cond_init(&inf->cond, &ca);
        (void)pthread_condattr_destroy(&ca);
        atomic_init(&inf->stop, false);
        atomic_init(&inf->synced, false);
        atomic_init(&inf->api_calls, 0);
        atomic_init(&inf->list_calls, 0);
        *ret = inf;
        return 0;
}

int informer_add_handler(struct informer *inf, const struct informer_handler *h)
{
        if (!h || inf->started)
                return CM_EINVAL;
        if (inf->n_handlers == MAX_HANDLERS)
                return CM_ETOOBIG;
        inf->handlers[inf->n_handlers++] = *h;
        return 0;
}

int informer_start(struct informer *inf)
{
        if (inf->started || !inf->config)
                return CM_EINVAL;
        if (pthread_create(&inf->thread, NULL, informer_thread, inf) != 0)
                return CM_EIO;
        inf->started = true;
        return 0;
}

bool informer_has_synced(struct informer *inf)
{
        return atomic_load(&inf->synced);
}

int informer_wait_synced(struct informer *inf, uint64_t timeout_ms)
{
        struct timespec ts;
        bool ok;

        clock_deadline_ts(timeout_ms, &ts);
        (void)pthread_mutex_lock(&inf->mu);
        while (!atomic_load(&inf->synced) && !atomic_load(&inf->stop))
                if (pthread_cond_timedwait(&inf->cond, &inf->mu, &ts) != 0)
                        break;
        ok = atomic_load(&inf->synced);
        (void)pthread_mutex_unlock(&inf->mu);
        return ok ? 0 : CM_ETIMEDOUT;
}

void informer_stop(struct informer *inf)
{
        (void)pthread_mutex_lock(&inf->mu);
        atomic_store(&inf->stop, true);
        (void)pthread_cond_broadcast(&inf->cond);
        (void)pthread_mutex_unlock(&inf->mu);
        if (inf->started && !inf->joined) {
                (void)pthread_join(inf->thread, NULL);
                inf->joined = true;
        }
}

struct informer *informer_free(struct informer *inf)
{
        if (!inf)
                return NULL;
        informer_stop(inf);
        informer_store_release(&inf->store);
        kube_client_free(inf->client);
        (void)pthread_cond_destroy(&inf->cond);
        (void)pthread_mutex_destroy(&inf->mu);
        free(inf->rv);
        free(inf->ns);
        free(inf->selector);
        free(inf->user_agent);
        free(inf);
        return NULL;
}

struct each {
        struct informer *inf;
        void (*fn)(void *arg, struct kube_object *obj);
        void *arg;
        size_t calls;
};

static void each_one(void *arg, const char *ns, const char *name)
{
        struct each *e = arg;
        struct kube_object *o = informer_get(e->inf, ns, name);

        if (!o)
                return; /* deleted since the keys were taken */
        e->fn(e->arg, o);
        e->calls++;
        kube_object_unref(o);
}

size_t informer_each(struct informer *inf,
                     const char *ns,
                     const char *cluster,
                     void (*fn)(void *arg, struct kube_object *obj),
                     void *arg)
{
        struct each e = { .inf = inf, .fn = fn, .arg = arg };

        (void)informer_each_key(inf, ns, cluster, each_one, &e);
        return e.calls;
}

struct kube_object *informer_get(struct informer *inf, const char *ns, const char *name)
{
        struct entry *e;
        struct kube_object *o = NULL;

        (void)pthread_rwlock_rdlock(&inf->store.lock);
        e = *informer_store_find(&inf->store, ns ? ns : "", name);
        if (e)
                o = informer_entry_object(e);
        (void)pthread_rwlock_unlock(&inf->store.lock);
        return o;
}

static int cmp_object(const void *a, const void *b)
{
        const struct kube_object *x = *(const struct kube_object *const *)a;
        const struct kube_object *y = *(const struct kube_object *const *)b;
        int c = strcmp(kube_object_namespace(x), kube_object_namespace(y));

        return c ? c : strcmp(kube_object_name(x), kube_object_name(y));
}

int informer_list(struct informer *inf,
                  const char *ns,
                  const char *cluster,
                  struct kube_object ***ret,
                  size_t *ret_n)
{
        struct collect c = { .ns = ns, .cluster = cluster };

        informer_store_collect(&inf->store, &c);
        if (c.n > 1)
                qsort(c.obj, c.n, sizeof(*c.obj), cmp_object);
        *ret = c.obj;
        *ret_n = c.n;
        return 0;
}

size_t informer_each_key(struct informer *inf,
                         const char *ns,
                         const char *cluster,
                         void (*fn)(void *arg, const char *ns, const char *name),
                         void *arg)
{
        struct collect c = { .ns = ns, .cluster = cluster, .keys = true };

        informer_store_collect(&inf->store, &c);
        for (size_t i = 0; i < c.n; i++) {
                fn(arg, c.key[i], informer_key_name(c.key[i]));
                free(c.key[i]);
        }
        free(c.key);
        return c.n;
}

size_t informer_len(struct informer *inf)
{
        size_t n;

        (void)pthread_rwlock_rdlock(&inf->store.lock);
        n = inf->store.n;
        (void)pthread_rwlock_unlock(&inf->store.lock);
        return n;
}
