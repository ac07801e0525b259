/*
 * kube_events: core/v1 Event recorder with client-go's repeat aggregation.
 *
 * event_record() formats the event on the caller's thread and appends it to a bounded ring
 * (dropping it when the ring is full: a reconciler never waits for the API server). One
 * writer thread pops events in order and writes them with its own kube_client. It keeps a
 * small cache of the Events it wrote, keyed by (involved object, type, reason, message):
 * a repeat within 10 minutes becomes a merge PATCH of count and lastTimestamp on the
 * existing Event (a new Event when that one is gone), anything else a POST. Before that,
 * client-go's spam filter lets each involved object have 25 events at once and then one
 * per 5 minutes, so a hot-looping reconciler cannot flood the API server; and once one
 * (object, type, reason) had 10 distinct messages in 10 minutes, the rest are combined
 * into one Event "(combined from similar events): <newest message>" (client-go's
 * EventAggregator).
 *
 * Threads: the ring, `busy` and `stopping` are guarded by mu; the cache and the client
 * belong to the writer thread. The dropped counter is atomic.
 */
#include "kube_events.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "log.h"
#include "metrics.h"
#include "rfc3339.h"
#include "xalloc.h"

#define LOGGER         "events"
#define QUEUE_DEFAULT  1024
#define MESSAGE_MAX    1024
#define AGG_WINDOW_MS  (10 * 60 * 1000)
#define AGG_MAX        256
#define SPAM_MAX       256
#define SPAM_BURST     25
#define SPAM_REFILL_MS (5 * 60 * 1000) /* one more event per object every 5 minutes */
#define SIMILAR_MAX    256
#define SIMILAR_LIMIT  10 /* distinct messages before they are combined */
#define COMBINED       "(combined from similar events): "
#define FREE_FLUSH_MS  1000
#define CLIENT_TIMEOUT 10000

struct ev {
        cJSON *involved; /* owned: the involvedObject reference */
        char *type;      /* owned */
        char *reason;    /* owned */
        char *message;   /* owned */
        int64_t wall_s;  /* when it was recorded */
};

/* An Event this recorder wrote recently. */
struct agg {
        char *key;  /* owned; NULL = free slot */
        char *ns;   /* owned: the Event's namespace */
        char *name; /* owned: the Event's name */
        int64_t count;
        int64_t first_s;
        uint64_t seen_ms;
};

/* Distinct messages seen for one (object, type, reason), for client-go's EventAggregator. */
/* The head of a slot in a small table kept by key, least recently used out first. */
struct lru {
        char *key; /* owned; NULL = free slot */
        uint64_t last_ms;
};

struct similar {
        struct lru lru;               /* first: the table is searched by lru_slot() */
        uint64_t msgs[SIMILAR_LIMIT]; /* FNV-1a hashes of the distinct messages */
        size_t n;
};

/* client-go's per-object spam filter: a token bucket kept as milliseconds of credit. */
struct spam {
        struct lru lru; /* first: the table is searched by lru_slot() */
        uint64_t credit_ms;
};

struct event_recorder {
        char *component;               /* owned */
        char *host;                    /* owned */
        const struct clock_ops *clock; /* borrowed */
        struct metric_series *dropped_series;
        _Atomic uint64_t dropped;

        pthread_mutex_t mu;
        pthread_cond_t work; /* an event was queued or stopping was set */
        pthread_cond_t idle; /* the ring emptied and nothing is being written */
        struct ev *ring;     /* owned, cap entries */
        size_t cap, head, len;
        bool busy;
        bool stopping;
        pthread_t thread;

        /* writer thread */
        struct kube_client *kc;
        struct agg cache[AGG_MAX];
        struct spam spam[SPAM_MAX];
        struct similar similar[SIMILAR_MAX];
        uint64_t seq;
};

static void ev_release(struct ev *e)
{
        cJSON_Delete(e->involved);
        free(e->type);
        free(e->reason);
        free(e->message);
        *e = (struct ev){ 0 };
}

static void format_time(int64_t wall_s, char out[RFC3339_LEN])
{
        rfc3339_format((time_t)wall_s, out);
}

/* Cuts s to at most max bytes without splitting a UTF-8 sequence. */
static void truncate_utf8(char *s, size_t max)
{
        size_t cut = max;

        if (strlen(s) <= max)
                return;
        /* s[max] is the first byte dropped; if it continues a sequence, drop that whole */
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
                cut--;
        s[cut] = '\0';
}

static void count_drop(struct event_recorder *r, const char *why, const char *reason)
{
        atomic_fetch_add(&r->dropped, 1);
        if (r->dropped_series)
                metric_counter_inc(r->dropped_series);
        log_debug(LOGGER, "event dropped", "why=%s reason=%s", why, reason ? reason : "");
}

/* ---- writer thread: aggregation cache ---- */

static char *agg_key(const struct ev *e)
{
        const cJSON *o = e->involved;
        const char *f[] = { "uid", "kind", "namespace", "name" };
        const char *v[4];

        for (size_t i = 0; i < ARRAY_SIZE(f); i++)
                if (json_get_string(NULL, o, f[i], &v[i]) < 0)
                        v[i] = "";
        return xasprintf("%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", v[0], v[1], v[2], v[3], e->type,
                         e->reason, e->message);
}

static void agg_clear(struct agg *a)
{
        free(a->key);
        free(a->ns);
        free(a->name);
        *a = (struct agg){ 0 };
}

/* The cached Event for key, if written within the window. */
static struct agg *agg_find(struct event_recorder *r, const char *key, uint64_t now)
{
        for (size_t i = 0; i < AGG_MAX; i++) {
                struct agg *a = &r->cache[i];

                if (a->key && !strcmp(a->key, key))
                        return now - a->seen_ms < AGG_WINDOW_MS ? a : NULL;
        }
        return NULL;
}

/* A slot for a new entry: the one with this key, a free one, or the least recently seen. */
static struct agg *agg_slot(struct event_recorder *r, const char *key)
{
        struct agg *best = &r->cache[0];

        for (size_t i = 0; i < AGG_MAX; i++) {
                struct agg *a = &r->cache[i];

                if (!a->key || !strcmp(a->key, key))
                        return a;
                if (a->seen_ms < best->seen_ms)
                        best = a;
        }
        return best;
}

/* ---- writer thread: API calls ---- */

static const char *involved_str(const struct ev *e, const char *field)
{
        const char *v = NULL;

        if (json_get_string(NULL, e->involved, field, &v) < 0)
                return "";
        return v;
}

static const char *event_ns(const struct ev *e)
{
        const char *ns = involved_str(e, "namespace");

        return *ns ? ns : "default"; /* client-go: cluster-scoped objects → default */
}

/* "<object name>.<hex>", unique per recorder and, with the system clock, across replicas. */
static char *event_name(struct event_recorder *r, const struct ev *e)
{
        struct timespec ts = { 0 };
        uint64_t nanos;

        if (r->clock == clock_system())
                clock_gettime(CLOCK_REALTIME, &ts);
        else
                ts.tv_sec = (time_t)clock_wall_s(r->clock);
        nanos = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + r->seq++;
        return xasprintf("%s.%llx", involved_str(e, "name"), (unsigned long long)nanos);
}

static cJSON *event_object(struct event_recorder *r, const struct ev *e, const char *name)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");
        cJSON *src;
        char ts[RFC3339_LEN];

        format_time(e->wall_s, ts);
        cJSON_AddStringToObject(o, "apiVersion", "v1");
        cJSON_AddStringToObject(o, "kind", "Event");
        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "namespace", event_ns(e));
        cJSON_AddItemToObject(o, "involvedObject", cJSON_Duplicate(e->involved, true));
        cJSON_AddStringToObject(o, "reason", e->reason);
        cJSON_AddStringToObject(o, "message", e->message);
        src = cJSON_AddObjectToObject(o, "source");
        cJSON_AddStringToObject(src, "component", r->component);
        cJSON_AddStringToObject(src, "host", r->host);
        cJSON_AddStringToObject(o, "firstTimestamp", ts);
        cJSON_AddStringToObject(o, "lastTimestamp", ts);
        cJSON_AddNumberToObject(o, "count", 1);
        cJSON_AddStringToObject(o, "type", e->type);
        cJSON_AddStringToObject(o, "reportingComponent", r->component);
        cJSON_AddStringToObject(o, "reportingInstance", r->host);
        return o;
}

static int create_event(struct event_recorder *r, const struct ev *e, const char *key)
{
        struct kube_error err = { 0 };
        char *name = NULL;
        cJSON *obj = NULL;
        struct agg *a;
        int ret = CM_EEXIST;

        for (int tries = 0; tries < 2 && ret == CM_EEXIST; tries++) {
                free(name);
                cJSON_Delete(obj);
                name = event_name(r, e);
                obj = event_object(r, e, name);
                kube_error_release(&err);
                ret = kube_create(r->kc, &KUBE_RES_EVENTS, event_ns(e), obj, NULL, &err);
        }
        if (ret == 0) {
                a = agg_slot(r, key);
                agg_clear(a);
                *a = (struct agg){ .key = xstrdup(key),
                                   .ns = xstrdup(event_ns(e)),
                                   .name = name,
                                   .count = 1,
                                   .first_s = e->wall_s,
                                   .seen_ms = clock_now_ms(r->clock) };
                name = NULL;
        } else {
                log_warn(LOGGER, "could not write event", "reason=%s object=%s err=%s detail=%s",
                         e->reason, involved_str(e, "name"), cm_strerror(ret),
                         err.message ? err.message : "");
        }
        kube_error_release(&err);
        cJSON_Delete(obj);
        free(name);
        return ret;
}

/* Bumps count and lastTimestamp of the cached Event a. */
static int bump_event(struct event_recorder *r, struct agg *a, const struct ev *e)
{
        struct kube_error err = { 0 };
        cJSON *p = cJSON_CreateObject();
        char ts[RFC3339_LEN];
        char *patch;
        int ret;

        format_time(e->wall_s, ts);
        cJSON_AddNumberToObject(p, "count", (double)(a->count + 1));
        cJSON_AddStringToObject(p, "lastTimestamp", ts);
        cJSON_AddStringToObject(p, "message", e->message); /* a combined event's newest */
        patch = cJSON_PrintUnformatted(p);
        cJSON_Delete(p);
        if (!patch)
                return CM_ENOMEM;
        ret = kube_patch(r->kc,
                         &(struct kube_patch_opts){ .resource = &KUBE_RES_EVENTS,
                                                    .ns = a->ns,
                                                    .name = a->name,
                                                    .subresource = NULL,
                                                    .type = KUBE_PATCH_MERGE,
                                                    .body = patch },
                         NULL, &err);
        if (ret == 0) {
                a->count++;
                a->seen_ms = clock_now_ms(r->clock);
        } else if (ret != CM_ENOTFOUND) {
                log_warn(LOGGER, "could not update event", "event=%s/%s err=%s detail=%s", a->ns,
                         a->name, cm_strerror(ret), err.message ? err.message : "");
        }
        kube_error_release(&err);
        cJSON_free(patch);
        return ret;
}

/* ---- writer thread: spam filter ---- */

static char *spam_key(const struct ev *e)
{
        const char *f[] = { "kind", "namespace", "name", "uid", "apiVersion" };
        const char *v[5];

        for (size_t i = 0; i < ARRAY_SIZE(f); i++)
                if (json_get_string(NULL, e->involved, f[i], &v[i]) < 0)
                        v[i] = "";
        return xasprintf("%s\x1f%s\x1f%s\x1f%s\x1f%s", v[0], v[1], v[2], v[3], v[4]);
}

/* The slot for key among the n slots at base, stride bytes apart, each starting with a
 * struct lru: key's own (key is freed; *own set), else a free one, else the least recently
 * used one (its key freed; the caller resets the slot and stores key in it). */
static struct lru *lru_slot(void *base, size_t n, size_t stride, char *key, bool *own)
{
        struct lru *best = base;

        for (size_t i = 0; i < n; i++) {
                struct lru *s = (struct lru *)((char *)base + i * stride);

                if (s->key && !strcmp(s->key, key)) {
                        free(key);
                        *own = true;
                        return s;
                }
                if (!s->key || (best->key && s->last_ms < best->last_ms))
                        best = s;
        }
        free(best->key);
        *own = false;
        return best;
}

/* The bucket for key: existing, free, or the least recently used one (reset). */
static struct spam *spam_slot(struct event_recorder *r, char *key, uint64_t now)
{
        bool own;
        struct spam *s = (struct spam *)lru_slot(r->spam, SPAM_MAX, sizeof(r->spam[0]), key, &own);

        if (!own)
                *s = (struct spam){ .lru = { .key = key, .last_ms = now },
                                    .credit_ms = (uint64_t)SPAM_BURST * SPAM_REFILL_MS };
        return s;
}

/* client-go EventSourceObjectSpamFilter: 25 events per object at once, then one per 5
 * minutes. Repeats count too (each would be a PATCH). */
static bool spam_allow(struct event_recorder *r, const struct ev *e)
{
        uint64_t now = clock_now_ms(r->clock);
        struct spam *s = spam_slot(r, spam_key(e), now);
        uint64_t cap = (uint64_t)SPAM_BURST * SPAM_REFILL_MS;

        s->credit_ms += now - s->lru.last_ms;
        if (s->credit_ms > cap)
                s->credit_ms = cap;
        s->lru.last_ms = now;
        if (s->credit_ms < SPAM_REFILL_MS)
                return false;
        s->credit_ms -= SPAM_REFILL_MS;
        return true;
}

/* ---- writer thread: similar events ---- */

static uint64_t fnv1a(const char *s)
{
        uint64_t h = 0xcbf29ce484222325u;

        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 0x100000001b3u;
        return h;
}

/* The record for key: existing, free, or the least recently used one (reset). */
static struct similar *similar_slot(struct event_recorder *r, char *key)
{
        bool own;
        struct similar *s = (struct similar *)lru_slot(r->similar, SIMILAR_MAX,
                                                       sizeof(r->similar[0]), key, &own);

        if (!own)
                *s = (struct similar){ .lru = { .key = key } };
        return s;
}

/* client-go EventAggregator: once one (object, type, reason) had 10 distinct messages
 * within 10 minutes, further events of it are combined into one Event. Returns the key
 * of that combined Event (caller frees), or NULL to record e on its own. */
static char *similar_combine(struct event_recorder *r, const struct ev *e)
{
        uint64_t now = clock_now_ms(r->clock);
        char *obj = spam_key(e);
        struct similar *s = similar_slot(r, xasprintf("%s\x1f%s\x1f%s", obj, e->type, e->reason));
        uint64_t h = fnv1a(e->message);
        bool seen = false;

        free(obj);
        if (now - s->lru.last_ms > AGG_WINDOW_MS)
                s->n = 0;
        s->lru.last_ms = now;
        for (size_t i = 0; i < s->n && !seen; i++)
                seen = s->msgs[i] == h;
        if (!seen && s->n < SIMILAR_LIMIT)
                s->msgs[s->n++] = h;
        if (s->n < SIMILAR_LIMIT)
                return NULL;
        return xasprintf("combined\x1f%s", s->lru.key);
}

static void write_event(struct event_recorder *r, const struct ev *e)
{
        struct ev combined = *e; /* shallow: only message is replaced (and freed) */
        char *key;
        struct agg *a;

        if (!spam_allow(r, e)) {
                count_drop(r, "spam filter", e->reason);
                return;
        }
        key = similar_combine(r, e);
        if (key) {
                combined.message = xasprintf(COMBINED "%s", e->message);
                truncate_utf8(combined.message, MESSAGE_MAX);
        } else {
                key = agg_key(e);
        }
        a = agg_find(r, key, clock_now_ms(r->clock));
        /* a repeat whose Event was deleted meanwhile starts a new Event */
        if (!a || bump_event(r, a, &combined) == CM_ENOTFOUND) {
                if (a)
                        agg_clear(a);
                (void)create_event(r, &combined, key);
        }
        if (combined.message != e->message)
                free(combined.message);
        free(key);
}

static void *writer_main(void *arg)
{
        struct event_recorder *r = arg;
        struct ev e;

        pthread_mutex_lock(&r->mu);
        for (;;) {
                while (!r->len && !r->stopping)
                        pthread_cond_wait(&r->work, &r->mu);
                if (r->stopping)
                        break;
                e = r->ring[r->head];
                r->ring[r->head] = (struct ev){ 0 };
                r->head = (r->head + 1) % r->cap;
                r->len--;
                r->busy = true;
                pthread_mutex_unlock(&r->mu);
                write_event(r, &e);
                ev_release(&e);
                pthread_mutex_lock(&r->mu);
                r->busy = false;
                if (!r->len)
                        pthread_cond_broadcast(&r->idle);
        }
        pthread_mutex_unlock(&r->mu);
        return NULL;
}

/* ---- recording (any thread) ---- */

static cJSON *involved_ref(const cJSON *obj)
{
        static const char *const meta[] = { "namespace", "name", "uid", "resourceVersion" };
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        cJSON *ref = cJSON_CreateObject();
        const char *v;

        if (json_get_string(NULL, obj, "kind", &v) == 0)
                cJSON_AddStringToObject(ref, "kind", v);
        for (size_t i = 0; i < ARRAY_SIZE(meta); i++)
                if (json_get_string(NULL, md, meta[i], &v) == 0 && *v)
                        cJSON_AddStringToObject(ref, meta[i], v);
        if (json_get_string(NULL, obj, "apiVersion", &v) == 0)
                cJSON_AddStringToObject(ref, "apiVersion", v);
        return ref;
}

static bool valid_event(const cJSON *obj, const char *type, const char *reason)
{
        return obj && kube_meta_str(obj, "name") && type &&
               (!strcmp(type, "Normal") || !strcmp(type, "Warning")) && reason && *reason;
}

/* Appends e (taken) to the ring, or drops it. */
static void enqueue(struct event_recorder *r, struct ev *e)
{
        bool queued = false;

        pthread_mutex_lock(&r->mu);
        if (!r->stopping && r->len < r->cap) {
                r->ring[(r->head + r->len) % r->cap] = *e;
                r->len++;
                queued = true;
                pthread_cond_signal(&r->work);
        }
        pthread_mutex_unlock(&r->mu);
        if (!queued) {
                count_drop(r, "queue full", e->reason);
                ev_release(e);
        }
}

void event_record(struct event_recorder *r,
                  const cJSON *obj,
                  const char *type,
                  const char *reason,
                  const char *fmt,
                  ...)
{
        char msg[MESSAGE_MAX + 4];
        struct ev e;
        va_list ap;

        if (!r)
                return;
        if (!valid_event(obj, type, reason)) {
                count_drop(r, "invalid", reason);
                return;
        }
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        truncate_utf8(msg, MESSAGE_MAX);
        e = (struct ev){ .involved = involved_ref(obj),
                         .type = xstrdup(type),
                         .reason = xstrdup(reason),
                         .message = xstrdup(msg),
                         .wall_s = clock_wall_s(r->clock) };
        enqueue(r, &e);
}

int event_recorder_flush(struct event_recorder *r, uint64_t timeout_ms)
{
        struct timespec deadline;
        int w = 0;
        int ret;

        clock_deadline_ts(timeout_ms, &deadline);
        pthread_mutex_lock(&r->mu);
        while ((r->len || r->busy) && !r->stopping && w == 0)
                w = pthread_cond_timedwait(&r->idle, &r->mu, &deadline);
        ret = r->len || r->busy ? CM_ETIMEDOUT : 0;
        pthread_mutex_unlock(&r->mu);
        return ret;
}

uint64_t event_recorder_dropped(const struct event_recorder *r)
{
        return atomic_load(&r->dropped);
}

/* ---- lifecycle ---- */

static int sync_init(struct event_recorder *r)
{
        pthread_condattr_t ca;
        int ret = CM_ENOMEM;

        if (pthread_condattr_init(&ca) != 0)
                return CM_ENOMEM;
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
            pthread_cond_init(&r->idle, &ca) != 0)
                goto out;
        if (pthread_cond_init(&r->work, &ca) != 0) {
                pthread_cond_destroy(&r->idle);
                goto out;
        }
        if (pthread_mutex_init(&r->mu, NULL) != 0) {
                pthread_cond_destroy(&r->work);
                pthread_cond_destroy(&r->idle);
                goto out;
        }
        ret = 0;
out:
        pthread_condattr_destroy(&ca);
        return ret;
}

static char *default_host(void)
{
        char host[256];

        if (gethostname(host, sizeof(host) - 1) < 0)
                return xstrdup("unknown");
        host[sizeof(host) - 1] = '\0';
        return xstrdup(host);
}

static int register_metrics(struct event_recorder *r, struct metrics *m)
{
        struct metric_family *f;
        int ret;

        if (!m)
                return 0;
        ret = metrics_counter(m, "capmaas_events_dropped_total",
                              "Kubernetes Events dropped because the recorder's queue was full "
                              "or the event was invalid.",
                              NULL, &f);
        if (ret == 0)
                r->dropped_series = metric_series(f, NULL);
        return ret;
}

static void recorder_destroy(struct event_recorder *r)
{
        r->kc = kube_client_free(r->kc);
        free(r->ring);
        free(r->component);
        free(r->host);
        free(r);
}

static int start(struct event_recorder *r, const struct event_recorder_opts *o)
{
        int ret;

        ret = register_metrics(r, o->metrics);
        if (ret == 0)
                ret = kube_client_new(&(struct kube_client_opts){ .config = o->config,
                                                                  .limiter = o->limiter,
                                                                  .timeout_ms = CLIENT_TIMEOUT },
                                      &r->kc);
        if (ret == 0 && pthread_create(&r->thread, NULL, writer_main, r) != 0)
                ret = CM_ENOMEM;
        return ret;
}

int event_recorder_new(const struct event_recorder_opts *o, struct event_recorder **ret)
{
        struct event_recorder *r;
        int err;

        if (!o || !o->config || !o->component || !*o->component)
                return CM_EINVAL;
        r = xcalloc(1, sizeof(*r));
        r->component = xstrdup(o->component);
        r->host = o->host ? xstrdup(o->host) : default_host();
        r->clock = o->clock ? o->clock : clock_system();
        r->cap = o->queue_len ? o->queue_len : QUEUE_DEFAULT;
        r->ring = xcalloc(r->cap, sizeof(*r->ring));
        err = sync_init(r);
        if (err < 0) {
                recorder_destroy(r);
                return err;
        }
        err = start(r, o);
        if (err < 0) {
                pthread_cond_destroy(&r->work);
                pthread_cond_destroy(&r->idle);
                pthread_mutex_destroy(&r->mu);
                recorder_destroy(r);
                return err;
        }
        *ret = r;
        return 0;
}

struct event_recorder *event_recorder_free(struct event_recorder *r)
{
        size_t lost;

        if (!r)
                return NULL;
        if (event_recorder_flush(r, FREE_FLUSH_MS) < 0)
                log_debug(LOGGER, "flush at shutdown timed out", "timeout_ms=%d", FREE_FLUSH_MS);
        pthread_mutex_lock(&r->mu);
        r->stopping = true;
        pthread_cond_broadcast(&r->work);
        pthread_cond_broadcast(&r->idle);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
        lost = r->len;
        if (lost)
                log_warn(LOGGER, "events not written at shutdown", "queued=%zu", lost);
        while (r->len) {
                ev_release(&r->ring[r->head]);
                r->head = (r->head + 1) % r->cap;
                r->len--;
        }
        for (size_t i = 0; i < AGG_MAX; i++)
                agg_clear(&r->cache[i]);
        for (size_t i = 0; i < SPAM_MAX; i++)
                free(r->spam[i].lru.key);
        for (size_t i = 0; i < SIMILAR_MAX; i++)
                free(r->similar[i].lru.key);
        pthread_cond_destroy(&r->work);
        pthread_cond_destroy(&r->idle);
        pthread_mutex_destroy(&r->mu);
        recorder_destroy(r);
        return NULL;
}
