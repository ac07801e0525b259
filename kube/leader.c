/*
 * leader: client-go's LeaseLock leader election (kubernetes.md §5.4).
 *
 * One elector thread runs attempt() every retry period. An attempt GETs the Lease (or
 * creates it when absent), notes when the Lease's spec last changed on OUR clock, stands by
 * while another holder's lease is still valid by that measure, and otherwise PUTs itself as
 * holder with the resourceVersion it read, so of two candidates racing for one Lease exactly
 * one wins and the other gets a Conflict. A leader first tries a "fast path" renew: a PUT of
 * its cached Lease without the GET; a Conflict there (someone else wrote the Lease) falls
 * back to the GET path. A leader that sees another holder, or cannot renew within the renew
 * deadline, gives up leadership (on_stopped). leader_stop() releases the Lease.
 *
 * Waits between attempts are real time (retry_ms); expiry and the renew deadline are
 * measured on the injected clock, so tests move a fake clock and use a short retry period.
 *
 * Threads: everything below "elector thread" touches the kube client and the cached Lease
 * and runs only on the elector thread (or after it was joined). `leading` and `attempts`
 * are atomics; `stopping`/`release` are guarded by mu.
 */
#include "leader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "clock.h"
#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "log.h"
#include "metrics.h"
#include "rfc3339.h"
#include "xalloc.h"

#define LOGGER "leader-election"

enum attempt {
        ATTEMPT_HOLD,  /* we hold the Lease now */
        ATTEMPT_OTHER, /* another holder's lease is valid */
        ATTEMPT_ERROR, /* transient failure or lost race: try again later */
};

struct leader {
        char *ns;       /* owned */
        char *name;     /* owned */
        char *identity; /* owned */
        uint64_t lease_ms, renew_deadline_ms, retry_ms;
        const struct clock_ops *clock; /* borrowed */
        void (*on_started)(void *arg);
        void (*on_stopped)(void *arg);
        void *arg;
        struct metric_series *gauge; /* owned by the registry; NULL = none */

        pthread_mutex_t mu;
        pthread_cond_t cond; /* CLOCK_MONOTONIC; signalled on stop */
        bool stopping;       /* guarded by mu */
        bool release;        /* guarded by mu: release the Lease when stopping */
        bool running;        /* the thread exists and was not joined (caller's thread) */
        pthread_t thread;
        atomic_bool leading;
        _Atomic uint64_t attempts;

        /* elector thread */
        struct kube_client *kc; /* owned */
        cJSON *observed;        /* owned: the Lease as last read or written */
        uint64_t observed_ms;   /* clock time its spec was first seen in this form */
        uint64_t renewed_ms;    /* clock time of the last successful acquire/renew */
        uint64_t rng;           /* xorshift state for the acquire jitter */
};

/* ---- Lease fields ---- */

/* RFC 3339 with microseconds (metav1.MicroTime). The system clock gives real microseconds;
 * an injected clock has whole seconds only. */
static void micro_time(const struct clock_ops *c, char out[RFC3339_MICRO_LEN])
{
        struct timespec ts = { 0 };

        if (!c || c == clock_system())
                clock_gettime(CLOCK_REALTIME, &ts);
        else
                ts.tv_sec = (time_t)clock_wall_s(c);
        rfc3339_format_micro(&ts, out);
}

static const cJSON *lease_spec(const cJSON *lease)
{
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(lease, "spec");

        return cJSON_IsObject(spec) ? spec : NULL;
}

static const char *lease_holder(const cJSON *lease)
{
        const char *h = NULL;

        if (json_get_string(NULL, lease_spec(lease), "holderIdentity", &h) < 0)
                return "";
        return h;
}

static int64_t lease_int(const cJSON *lease, const char *key, int64_t def)
{
        int64_t v;

        if (json_get_int64(NULL, lease_spec(lease), key, &v) < 0)
                return def;
        return v;
}

static int64_t lease_seconds(uint64_t ms)
{
        return (int64_t)((ms + 999) / 1000);
}

/* ---- elector thread: one attempt ---- */

/* Takes ownership of lease as the newest observation; restarts the expiry timer when the
 * record (spec) differs from what we saw before, or when we wrote it ourselves. */
static void observe(struct leader *l, cJSON *lease, uint64_t now, bool wrote)
{
        const cJSON *old = lease_spec(l->observed);
        const cJSON *cur = lease_spec(lease);

        if (wrote || !old || !cur || !cJSON_Compare(old, cur, true))
                l->observed_ms = now;
        cJSON_Delete(l->observed);
        l->observed = lease;
}

static bool holds(const struct leader *l)
{
        return l->observed && !strcmp(lease_holder(l->observed), l->identity);
}

/* The observed holder's lease has not run out on our clock. */
static bool lease_valid(const struct leader *l, uint64_t now)
{
        int64_t s = lease_int(l->observed, "leaseDurationSeconds", lease_seconds(l->lease_ms));

        if (s < 0)
                s = 0;
        return now < l->observed_ms + (uint64_t)s * 1000;
}

/* The record we write: ourselves as holder, renewed now; a new holder bumps transitions. */
static void fill_spec(const struct leader *l, cJSON *spec, const cJSON *old_lease)
{
        char now[RFC3339_MICRO_LEN];
        bool same = !strcmp(lease_holder(old_lease), l->identity);
        int64_t transitions = lease_int(old_lease, "leaseTransitions", 0);
        bool has_acquire = cJSON_IsString(
                cJSON_GetObjectItemCaseSensitive(lease_spec(old_lease), "acquireTime"));

        micro_time(l->clock, now);
        json_set_string(spec, "holderIdentity", l->identity);
        json_set_int64(spec, "leaseDurationSeconds", lease_seconds(l->lease_ms));
        if (!same || !has_acquire)
                json_set_string(spec, "acquireTime", now);
        json_set_string(spec, "renewTime", now);
        json_set_int64(spec, "leaseTransitions", same ? transitions : transitions + 1);
}

/* PUT base (with its resourceVersion) with us as holder. 0 or the client's error. */
static int put_holder(struct leader *l, const cJSON *base, uint64_t now)
{
        struct kube_error e = { 0 };
        cJSON *obj = cJSON_Duplicate(base, true);
        cJSON *written = NULL;
        int r;

        fill_spec(l, json_child_object(obj, "spec", NULL), base);
        r = kube_update(l->kc, &(struct kube_update_opts){ &KUBE_RES_LEASES, l->ns, l->name, NULL },
                        obj, &written, &e);
        if (r < 0) {
                log_debug(LOGGER, "lease update failed", "lease=%s/%s err=%s reason=%s", l->ns,
                          l->name, cm_strerror(r), e.reason ? e.reason : "");
                cJSON_Delete(written);
                written = NULL;
        } else {
                observe(l, written ? written : cJSON_Duplicate(obj, true), now, true);
                written = NULL;
        }
        kube_error_release(&e);
        cJSON_Delete(obj);
        return r;
}

static enum attempt create_lease(struct leader *l, uint64_t now)
{
        struct kube_error e = { 0 };
        cJSON *obj = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(obj, "metadata");
        cJSON *created = NULL;
        int r;

        cJSON_AddStringToObject(obj, "apiVersion", "coordination.k8s.io/v1");
        cJSON_AddStringToObject(obj, "kind", "Lease");
        cJSON_AddStringToObject(md, "name", l->name);
        cJSON_AddStringToObject(md, "namespace", l->ns);
        fill_spec(l, cJSON_AddObjectToObject(obj, "spec"), NULL);
        json_set_int64(json_child_object(obj, "spec", NULL), "leaseTransitions", 0);
        r = kube_create(l->kc, &KUBE_RES_LEASES, l->ns, obj, &created, &e);
        if (r == 0)
                observe(l, created ? created : cJSON_Duplicate(obj, true), now, true);
        else
                log_debug(LOGGER, "lease create failed", "lease=%s/%s err=%s", l->ns, l->name,
                          cm_strerror(r));
        kube_error_release(&e);
        cJSON_Delete(obj);
        return r == 0 ? ATTEMPT_HOLD : ATTEMPT_ERROR;
}

/* client-go tryAcquireOrRenew. */
static enum attempt attempt(struct leader *l)
{
        struct kube_error e = { 0 };
        uint64_t now = clock_now_ms(l->clock);
        cJSON *lease = NULL;
        int r;

        if (atomic_load(&l->leading) && holds(l) && lease_valid(l, now) &&
            put_holder(l, l->observed, now) == 0)
                return ATTEMPT_HOLD;
        r = kube_get(l->kc, &KUBE_RES_LEASES, l->ns, l->name, &lease, &e);
        kube_error_release(&e);
        if (r == CM_ENOTFOUND)
                return create_lease(l, now);
        if (r < 0) {
                log_debug(LOGGER, "lease get failed", "lease=%s/%s err=%s", l->ns, l->name,
                          cm_strerror(r));
                return ATTEMPT_ERROR;
        }
        observe(l, lease, now, false);
        if (*lease_holder(l->observed) && !holds(l) && lease_valid(l, now))
                return ATTEMPT_OTHER;
        return put_holder(l, l->observed, now) == 0 ? ATTEMPT_HOLD : ATTEMPT_ERROR;
}

/* client-go release(): holder "", duration 1 s, if we still hold the Lease. */
static void release_lease(struct leader *l)
{
        struct kube_error e = { 0 };
        cJSON *lease = NULL;
        cJSON *spec;
        char now[RFC3339_MICRO_LEN];
        int r;

        r = kube_get(l->kc, &KUBE_RES_LEASES, l->ns, l->name, &lease, &e);
        kube_error_release(&e);
        if (r == 0 && strcmp(lease_holder(lease), l->identity) != 0) {
                log_info(LOGGER, "lease held by another, not releasing", "lease=%s/%s holder=%s",
                         l->ns, l->name, lease_holder(lease));
                goto out;
        }
        if (r == 0) {
                micro_time(l->clock, now);
                spec = json_child_object(lease, "spec", NULL);
                json_set_string(spec, "holderIdentity", "");
                json_set_int64(spec, "leaseDurationSeconds", 1);
                json_set_string(spec, "acquireTime", now);
                json_set_string(spec, "renewTime", now);
                r = kube_update(
                        l->kc, &(struct kube_update_opts){ &KUBE_RES_LEASES, l->ns, l->name, NULL },
                        lease, NULL, &e);
                kube_error_release(&e);
        }
        if (r < 0)
                log_warn(LOGGER, "could not release the lease", "lease=%s/%s err=%s", l->ns,
                         l->name, cm_strerror(r));
        else
                log_info(LOGGER, "released the lease", "lease=%s/%s", l->ns, l->name);
out:
        cJSON_Delete(lease);
}

/* ---- elector thread: the loop ---- */

/* Up to 1.2 retry periods of extra wait (client-go's JitterUntil factor), so candidates
 * that started together spread out. */
static uint64_t jitter_ms(struct leader *l)
{
        l->rng ^= l->rng << 13;
        l->rng ^= l->rng >> 7;
        l->rng ^= l->rng << 17;
        return l->rng % (l->retry_ms * 12 / 10 + 1);
}

/* Waits one retry period (real time), plus jitter when asked. false when stopping. */
static bool wait_retry(struct leader *l, bool jitter)
{
        struct timespec deadline;
        bool go_on;
        int r = 0;

        clock_deadline_ts(l->retry_ms + (jitter ? jitter_ms(l) : 0), &deadline);
        pthread_mutex_lock(&l->mu);
        while (!l->stopping && r == 0)
                r = pthread_cond_timedwait(&l->cond, &l->mu, &deadline);
        go_on = !l->stopping;
        pthread_mutex_unlock(&l->mu);
        return go_on;
}

static bool is_stopping(struct leader *l)
{
        bool s;

        pthread_mutex_lock(&l->mu);
        s = l->stopping;
        pthread_mutex_unlock(&l->mu);
        return s;
}

static enum attempt counted_attempt(struct leader *l)
{
        enum attempt a = attempt(l);

        atomic_fetch_add(&l->attempts, 1);
        return a;
}

/* Campaigns until we hold the Lease (true) or are stopped (false). */
static bool acquire(struct leader *l)
{
        uint64_t start;

        while (!is_stopping(l)) {
                start = clock_now_ms(l->clock);
                if (counted_attempt(l) == ATTEMPT_HOLD) {
                        l->renewed_ms = start;
                        return true;
                }
                if (!wait_retry(l, true))
                        break;
        }
        return false;
}

/* Renews every retry period. true when leadership was lost, false when stopped. A renewal
 * counts from when its attempt started, so a slow success cannot stretch the deadline. */
static bool renew(struct leader *l)
{
        enum attempt a;
        uint64_t start;

        while (wait_retry(l, false)) {
                start = clock_now_ms(l->clock);
                a = counted_attempt(l);
                if (a == ATTEMPT_HOLD) {
                        l->renewed_ms = start;
                        continue;
                }
                if (a == ATTEMPT_OTHER ||
                    clock_now_ms(l->clock) - l->renewed_ms >= l->renew_deadline_ms)
                        return true;
        }
        return false;
}

static void set_leading(struct leader *l, bool on)
{
        atomic_store(&l->leading, on);
        if (l->gauge)
                metric_gauge_set(l->gauge, on ? 1.0 : 0.0);
}

/* The leader whose elector thread this is (so a callback calling leader_stop is seen). */
static _Thread_local struct leader *elector_self;

static void *elector_main(void *arg)
{
        struct leader *l = arg;
        bool release;

        elector_self = l;
        if (!acquire(l))
                return NULL;
        set_leading(l, true);
        log_info(LOGGER, "successfully acquired lease", "lease=%s/%s identity=%s", l->ns, l->name,
                 l->identity);
        if (l->on_started && !is_stopping(l))
                l->on_started(l->arg);
        if (renew(l)) {
                set_leading(l, false);
                log_error(LOGGER, "leader election lost", "lease=%s/%s identity=%s", l->ns, l->name,
                          l->identity);
                if (l->on_stopped)
                        l->on_stopped(l->arg);
                return NULL;
        }
        pthread_mutex_lock(&l->mu);
        release = l->release;
        pthread_mutex_unlock(&l->mu);
        if (release)
                release_lease(l);
        set_leading(l, false);
        return NULL;
}

/* ---- lifecycle ---- */

static char *make_identity(void)
{
        char host[256] = "unknown";
        uint8_t u[16] = { 0 };

        if (gethostname(host, sizeof(host) - 1) < 0)
                snprintf(host, sizeof(host), "unknown");
        host[sizeof(host) - 1] = '\0';
        if (getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u))
                abort(); /* getrandom cannot fail for 16 bytes on Linux >= 3.17 */
        u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
        u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
        return xasprintf("%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         host, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
                         u[11], u[12], u[13], u[14], u[15]);
}

static int sync_init(struct leader *l)
{
        pthread_condattr_t ca;
        int r = CM_ENOMEM;

        if (pthread_condattr_init(&ca) != 0)
                return CM_ENOMEM;
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
            pthread_cond_init(&l->cond, &ca) != 0)
                goto out;
        if (pthread_mutex_init(&l->mu, NULL) != 0) {
                pthread_cond_destroy(&l->cond);
                goto out;
        }
        r = 0;
out:
        pthread_condattr_destroy(&ca);
        return r;
}

static int register_gauge(struct leader *l, struct metrics *m)
{
        static const char *const labels[] = { "name", NULL };
        struct metric_family *f;
        int r;

        if (!m)
                return 0;
        r = metrics_gauge(m, "leader_election_master_status",
                          "Gauge of if the reporting system is master of the relevant lease, 0 "
                          "indicates backup, 1 indicates master. 'name' is the string used to "
                          "identify the lease. Please make sure to group by name.",
                          labels, &f);
        if (r < 0)
                return r;
        l->gauge = metric_series(f, l->name);
        metric_gauge_set(l->gauge, 0.0);
        return 0;
}

static uint64_t or_default(uint64_t v, uint64_t def)
{
        return v ? v : def;
}

static int client_new(struct leader *l, const struct leader_opts *o)
{
        /* client-go: lease calls time out at about half the renew deadline */
        uint64_t t = l->renew_deadline_ms / 2;

        return kube_client_new(
                &(struct kube_client_opts){ .config = o->config,
                                            .limiter = o->limiter,
                                            .timeout_ms = (uint32_t)(t < 1000    ? 1000
                                                                     : t > 60000 ? 60000
                                                                                 : t) },
                &l->kc);
}

int leader_new(const struct leader_opts *o, struct leader **ret)
{
        struct leader *l = NULL;
        int r = CM_EINVAL;

        if (!o || !o->config || !o->namespace || !*o->namespace || !o->name || !*o->name ||
            (o->identity && !*o->identity))
                return CM_EINVAL;
        l = xcalloc(1, sizeof(*l));
        l->ns = xstrdup(o->namespace);
        l->name = xstrdup(o->name);
        l->identity = o->identity ? xstrdup(o->identity) : make_identity();
        l->lease_ms = or_default(o->lease_ms, 15000);
        l->renew_deadline_ms = or_default(o->renew_deadline_ms, 10000);
        l->retry_ms = or_default(o->retry_ms, 2000);
        l->clock = o->clock ? o->clock : clock_system();
        l->on_started = o->on_started;
        l->on_stopped = o->on_stopped;
        l->arg = o->arg;
        if (l->renew_deadline_ms >= l->lease_ms || l->renew_deadline_ms * 10 <= l->retry_ms * 12)
                goto fail; /* client-go's validation */
        if (getrandom(&l->rng, sizeof(l->rng), 0) != (ssize_t)sizeof(l->rng) || !l->rng)
                l->rng = 0x9e3779b97f4a7c15u;
        r = sync_init(l);
        if (r < 0)
                goto fail;
        r = register_gauge(l, o->metrics);
        if (r == 0)
                r = client_new(l, o);
        if (r < 0) {
                pthread_cond_destroy(&l->cond);
                pthread_mutex_destroy(&l->mu);
                goto fail;
        }
        *ret = l;
        return 0;
fail:
        free(l->identity);
        free(l->name);
        free(l->ns);
        free(l);
        return r;
}

int leader_start(struct leader *l)
{
        if (l->running)
                return CM_EINVAL;
        if (pthread_create(&l->thread, NULL, elector_main, l) != 0)
                return CM_ENOMEM;
        l->running = true;
        return 0;
}

bool leader_is_leader(struct leader *l)
{
        return atomic_load(&l->leading);
}

const char *leader_identity(const struct leader *l)
{
        return l->identity;
}

uint64_t leader_attempts(struct leader *l)
{
        return atomic_load(&l->attempts);
}

static void halt(struct leader *l, bool release)
{
        pthread_mutex_lock(&l->mu);
        if (!l->stopping)
                l->release = release;
        l->stopping = true;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->mu);
        /* from a callback (the elector thread itself) only ask; a later call joins */
        if (elector_self == l)
                return;
        if (l->running) {
                pthread_join(l->thread, NULL);
                l->running = false;
        }
        set_leading(l, false);
}

void leader_stop(struct leader *l)
{
        if (l)
                halt(l, true);
}

void leader_abandon(struct leader *l)
{
        if (l)
                halt(l, false);
}

struct leader *leader_free(struct leader *l)
{
        if (!l)
                return NULL;
        leader_stop(l);
        l->kc = kube_client_free(l->kc);
        cJSON_Delete(l->observed);
        pthread_cond_destroy(&l->cond);
        pthread_mutex_destroy(&l->mu);
        free(l->identity);
        free(l->name);
        free(l->ns);
        free(l);
        return NULL;
}
