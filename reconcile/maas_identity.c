/*
 * maas_identity: the pool of per-cluster MAAS credentials (see maas_identity.h).
 */
#include "maas_identity.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "clock.h"
#include "err.h"
#include "informer.h"
#include "json.h"
#include "kube_client.h"
#include "log.h"
#include "metrics.h"
#include "token_bucket.h"
#include "xalloc.h"

#define LOGGER "maas-identity"

static const struct backoff_policy failure_backoff = { .base_ms = 1000, .max_ms = 60000 };

/* What the pool knows of one Secret. */
struct ident_slot {
        struct maas_ident *cur; /* the pool's reference; NULL when none could be built */
        uint64_t checked_ms;    /* when the Secret was last read (or a read was claimed) */
        int err;                /* the failure in force, 0 = none */
        const char *reason;
        char *message;
        uint64_t not_before_ms; /* no new attempt before (the failure's backoff) */
        /* While non-zero, one pass holds the identity as the probe after a backoff (or has
         * claimed it and reads the Secret): the others get the failure in force until the
         * probe's calls tell, or until this time (a probe that made no call). */
        uint64_t probe_until_ms;
        unsigned failures;
        struct token_bucket_stats spent; /* of the identities it retired (the metrics) */
        char *seen_rv; /* the Secret's resourceVersion at its last read, "" = none; NULL */
        bool reading;  /* one acquire is reading the Secret now (the others do not) */
};

enum { BUDGET_REQUESTS, BUDGET_DELAYED, BUDGET_WAIT, BUDGET_HOLDS, BUDGET_N };

/* The collector of the budget metrics: owned by the registry (it may be rendered after the
 * pool is gone: pool is then NULL). */
struct budget_collector {
        pthread_mutex_t mu;
        struct maas_ident_pool *pool; /* mu */
        struct metric_family *f[BUDGET_N];
};

struct maas_ident_pool {
        pthread_mutex_t lock;
        struct reconciler_table idents;   /* "ns/secret" -> ptr: struct ident_slot */
        struct reconciler_table clusters; /* "ns/cluster" -> ptr: "ns/secret" (owned) */
        struct reconciler_table zones;    /* "ns/secret" -> a: its inventory's zone digest */
        _Atomic size_t n_clusters;
        double qps;
        unsigned burst;
        const struct clock_ops *clock;
        uint32_t timeout_ms;
        uint64_t serial;
        struct budget_collector *budget_metrics; /* NULL without metrics */
        void (*changed)(void *arg, const char *ns, const char *secret);
        void *changed_arg;
};

void maas_ident_failure_release(struct maas_ident_failure *f)
{
        free(f->message);
        *f = (struct maas_ident_failure){ 0 };
}

static void stats_add(struct token_bucket_stats *sum, const struct token_bucket_stats *st)
{
        sum->reservations += st->reservations;
        sum->delayed += st->delayed;
        sum->wait_ms += st->wait_ms;
        sum->holds += st->holds;
}

/* What the slot's identities spent of their budgets: the retired ones' and the current's. */
static struct token_bucket_stats slot_spent(const struct ident_slot *s)
{
        struct token_bucket_stats sum = s->spent, st;

        if (s->cur) {
                token_bucket_stats(s->cur->budget, &st);
                stats_add(&sum, &st);
        }
        return sum;
}

/* Before each render: every identity's budget, labelled with its Secret (never a key). */
static void budget_collect(struct metrics *m, void *ud)
{
        struct budget_collector *k = ud;
        struct maas_ident_pool *pool;

        (void)m;
        pthread_mutex_lock(&k->mu);
        pool = k->pool;
        if (pool)
                pthread_mutex_lock(&pool->lock);
        for (size_t i = 0; pool && i < pool->idents.n; i++) {
                const char *key = pool->idents.items[i].key;
                struct token_bucket_stats st = slot_spent(pool->idents.items[i].ptr);

                metric_counter_set(metric_series(k->f[BUDGET_REQUESTS], key),
                                   (double)st.reservations);
                metric_counter_set(metric_series(k->f[BUDGET_DELAYED], key), (double)st.delayed);
                metric_counter_set(metric_series(k->f[BUDGET_WAIT], key),
                                   (double)st.wait_ms / 1000.0);
                metric_counter_set(metric_series(k->f[BUDGET_HOLDS], key), (double)st.holds);
        }
        if (pool)
                pthread_mutex_unlock(&pool->lock);
        pthread_mutex_unlock(&k->mu);
}

static void budget_collector_free(void *ud)
{
        struct budget_collector *k = ud;

        pthread_mutex_destroy(&k->mu);
        free(k);
}

/* capmaas_maas_identity_budget_*{identity="ns/secret"}: the per-identity request budgets,
 * as capmaas_client_budget_*{api="maas"} is the process-wide one's. */
static int budget_metrics(struct maas_ident_pool *pool, struct metrics *m)
{
        static const char *const labels[] = { "identity", NULL };

        static const struct {
                const char *name, *help;
        } fam[BUDGET_N] = {
                [BUDGET_REQUESTS] = { "capmaas_maas_identity_budget_requests_total",
                                      "Requests to a per-cluster MAAS (spec.identityRef) that "
                                      "took a token of its request budget." },
                [BUDGET_DELAYED] = { "capmaas_maas_identity_budget_delayed_total",
                                     "Requests to a per-cluster MAAS that waited for a token." },
                [BUDGET_WAIT] = { "capmaas_maas_identity_budget_wait_seconds_total",
                                  "Seconds requests to a per-cluster MAAS waited for its request "
                                  "budget, summed." },
                [BUDGET_HOLDS] = { "capmaas_maas_identity_budget_holds_total",
                                   "Retry-After answers of a per-cluster MAAS that held its whole "
                                   "request budget." },
        };
        struct budget_collector *k = xcalloc(1, sizeof(*k));
        int r = 0;

        pthread_mutex_init(&k->mu, NULL);
        for (size_t i = 0; r == 0 && i < BUDGET_N; i++)
                r = metrics_counter(m, fam[i].name, fam[i].help, labels, &k->f[i]);
        if (r == 0)
                r = metrics_add_collector(m, budget_collect, k, budget_collector_free);
        if (r < 0) {
                budget_collector_free(k);
                return r;
        }
        k->pool = pool;
        pool->budget_metrics = k;
        return 0;
}

/* Drops the budget series of identity key (pool lock held): the families stay bounded by
 * the identities the clusters name. */
static void budget_forget(struct maas_ident_pool *pool, const char *key)
{
        if (!pool->budget_metrics)
                return;
        for (size_t i = 0; i < BUDGET_N; i++)
                (void)metric_series_delete(pool->budget_metrics->f[i],
                                           (const char *const[]){ key, NULL });
}

int maas_ident_pool_new(const struct maas_ident_pool_opts *o, struct maas_ident_pool **ret)
{
        int err;

        struct maas_ident_pool *pool = xcalloc(1, sizeof(*pool));

        pthread_mutex_init(&pool->lock, NULL);
        pool->qps = o->qps;
        pool->burst = o->burst;
        pool->clock = o->clock ? o->clock : clock_system();
        pool->timeout_ms = o->timeout_ms;
        pool->changed = o->changed;
        pool->changed_arg = o->changed_arg;
        *ret = pool;
        err = o->metrics ? budget_metrics(pool, o->metrics) : 0;
        return err;
}

uint32_t maas_ident_pool_timeout_ms(const struct maas_ident_pool *pool)
{
        return pool->timeout_ms;
}

/* A list of the identity's (fleet_snapshot.c fills them; not called from here, so the two
 * modules do not call each other). */
static void fleet_free(struct reconciler_fleet *f)
{
        maas_node_list_release(&f->nodes);
        for (size_t i = 0; i < f->n_asked; i++)
                free(f->asked[i]);
        free(f->asked);
}

static void ident_free(struct maas_ident *id)
{
        maas_config_release(&id->cfg);
        memfile_close(&id->ca);
        token_bucket_free(id->budget);
        fleet_free(&id->fleets.fleet);
        fleet_free(&id->fleets.inflight);
        fleet_free(&id->fleets.unplaced);
        fleet_free(&id->fleets.deleting);
        free(id->endpoint);
        free(id->rv);
        free(id->key);
        free(id);
}

struct maas_ident *maas_ident_ref(struct maas_ident *id)
{
        atomic_fetch_add(&id->refs, 1);
        return id;
}

void maas_ident_put(struct maas_ident *id)
{
        if (id && atomic_fetch_sub(&id->refs, 1) == 1)
                ident_free(id);
}

void maas_ident_observe(void *ud, int err)
{
        struct maas_ident *id = ud;

        if (err == 0) {
                atomic_store(&id->unauthorized, false);
                atomic_store(&id->unreachable, false);
                atomic_store(&id->proven, true);
        } else if (err == CM_EUNAUTHORIZED) {
                atomic_store(&id->unauthorized, true);
                atomic_store(&id->proven, false);
        } else if (err == CM_ETRANSPORT || err == CM_ETIMEDOUT) {
                atomic_store(&id->unreachable, true);
        }
}

/* Retires the slot's identity (the pool's reference goes). Lock held. */
static void slot_retire(struct ident_slot *s)
{
        struct token_bucket_stats st;

        if (!s->cur)
                return;
        token_bucket_stats(s->cur->budget, &st);
        stats_add(&s->spent, &st);
        atomic_store(&s->cur->retired, true);
        maas_ident_put(s->cur);
        s->cur = NULL;
}

static void slot_free(struct ident_slot *s)
{
        if (!s)
                return;
        slot_retire(s);
        free(s->message);
        free(s->seen_rv);
        free(s);
}

struct maas_ident_pool *maas_ident_pool_free(struct maas_ident_pool *pool)
{
        if (!pool)
                return NULL;
        if (pool->budget_metrics) { /* the registry may still render: nothing of ours then */
                pthread_mutex_lock(&pool->budget_metrics->mu);
                pool->budget_metrics->pool = NULL;
                pthread_mutex_unlock(&pool->budget_metrics->mu);
        }
        for (size_t i = 0; i < pool->idents.n; i++)
                slot_free(pool->idents.items[i].ptr);
        reconciler_table_release(&pool->idents);
        for (size_t i = 0; i < pool->clusters.n; i++)
                free(pool->clusters.items[i].ptr);
        reconciler_table_release(&pool->clusters);
        reconciler_table_release(&pool->zones);
        pthread_mutex_destroy(&pool->lock);
        free(pool);
        return NULL;
}

/* --- clusters ------------------------------------------------------------------------------ */

/* "ns/cluster" of a MaasCluster: its cluster-name label, else its Cluster owner. New string
 * or NULL. */
static char *cluster_key_of(const struct kube_object *obj)
{
        const cJSON *o = kube_object_json(obj);
        const char *name =
                json_find_str(o, "metadata", "labels", "cluster.x-k8s.io/cluster-name", NULL);
        const cJSON *refs = json_find(o, "metadata", "ownerReferences", NULL);
        const cJSON *r;

        if (!name)
                cJSON_ArrayForEach (r, refs) {
                        const char *kind = json_find_str(r, "kind", NULL);

                        if (kind && strcmp(kind, "Cluster") == 0) {
                                name = json_find_str(r, "name", NULL);
                                break;
                        }
                }
        return name ? xasprintf("%s/%s", kube_object_namespace(obj), name) : NULL;
}

static void cluster_set(struct maas_ident_pool *pool, const char *key, const char *ident)
{
        struct reconciler_entry *e = reconciler_table_get(&pool->clusters, key);

        if (!ident) {
                if (e) {
                        free(e->ptr);
                        reconciler_table_del(&pool->clusters, key);
                }
        } else {
                if (!e)
                        e = reconciler_table_put(&pool->clusters, key);
                free(e->ptr);
                e->ptr = xstrdup(ident);
        }
        atomic_store(&pool->n_clusters, pool->clusters.n);
}

void maas_ident_cluster_put(struct maas_ident_pool *pool, const struct kube_object *obj)
{
        const char *secret =
                json_find_str(kube_object_json(obj), "spec", "identityRef", "name", NULL);
        char *key = cluster_key_of(obj);
        char *ident =
                secret && *secret ? xasprintf("%s/%s", kube_object_namespace(obj), secret) : NULL;

        if (key) {
                pthread_mutex_lock(&pool->lock);
                cluster_set(pool, key, ident);
                pthread_mutex_unlock(&pool->lock);
        }
        free(ident);
        free(key);
}

void maas_ident_cluster_del(struct maas_ident_pool *pool, const struct kube_object *obj)
{
        char *key = cluster_key_of(obj);

        if (key) {
                pthread_mutex_lock(&pool->lock);
                cluster_set(pool, key, NULL);
                pthread_mutex_unlock(&pool->lock);
        }
        free(key);
}

bool maas_ident_any(const struct maas_ident_pool *pool)
{
        return pool && atomic_load(&pool->n_clusters) > 0;
}

char *maas_ident_of_cluster(struct maas_ident_pool *pool, const char *ns, const char *cluster)
{
        char *key, *out = NULL;
        struct reconciler_entry *e;

        if (!maas_ident_any(pool) || !cluster)
                return NULL;
        key = xasprintf("%s/%s", ns, cluster);
        pthread_mutex_lock(&pool->lock);
        e = reconciler_table_get(&pool->clusters, key);
        if (e) /* "ns/secret": the Secret's name */
                out = xstrdup(strchr(e->ptr, '/') + 1);
        pthread_mutex_unlock(&pool->lock);
        free(key);
        return out;
}

bool maas_ident_cluster_is(struct maas_ident_pool *pool,
                           const char *cluster_key,
                           const char *ident_key)
{
        struct reconciler_entry *e;
        bool is;

        if (!maas_ident_any(pool))
                return ident_key == NULL;
        pthread_mutex_lock(&pool->lock);
        e = cluster_key ? reconciler_table_get(&pool->clusters, cluster_key) : NULL;
        is = e ? ident_key && strcmp(e->ptr, ident_key) == 0 : ident_key == NULL;
        pthread_mutex_unlock(&pool->lock);
        return is;
}

size_t maas_ident_clusters_naming(struct maas_ident_pool *pool, const char *ident_key, char ***ret)
{
        size_t n = 0;

        *ret = NULL;
        if (!maas_ident_any(pool))
                return 0;
        pthread_mutex_lock(&pool->lock);
        for (size_t i = 0; i < pool->clusters.n; i++) {
                if (strcmp(pool->clusters.items[i].ptr, ident_key) != 0)
                        continue;
                *ret = xrealloc(*ret, (n + 1) * sizeof(**ret));
                (*ret)[n++] = xstrdup(pool->clusters.items[i].key);
        }
        pthread_mutex_unlock(&pool->lock);
        return n;
}

bool maas_ident_zones_changed(struct maas_ident_pool *pool, const char *ident_key, uint64_t digest)
{
        struct reconciler_entry *e;
        bool changed;

        pthread_mutex_lock(&pool->lock);
        e = reconciler_table_put(&pool->zones, ident_key); /* a new one: a = 0, never a digest */
        changed = (uint64_t)e->a != digest;
        e->a = (int64_t)digest;
        pthread_mutex_unlock(&pool->lock);
        return changed;
}

/* --- the Secret ------------------------------------------------------------------------------ */

/* The key and its parts never reach a record; false when the redaction table is full. */
static bool hide_key(const struct maas_config *cfg, const char *key)
{
        return log_add_secret(key) && log_add_secret(cfg->creds.token_secret) &&
               log_add_secret(cfg->creds.token_key);
}

/* An identity from the Secret's JSON; CM_EINVAL with *ret_msg otherwise. */
static int ident_build(struct maas_ident_pool *pool,
                       const char *key,
                       const cJSON *secret,
                       struct maas_ident **ret,
                       char **ret_msg)
{
        struct maas_ident *id = NULL;
        char *ep = NULL, *api_key = NULL, *ca = NULL, *why = NULL;
        size_t ca_len = 0;
        const char *rv = json_find_str(secret, "metadata", "resourceVersion", NULL);
        int err;

        err = maas_secret_parse(secret, &ep, &api_key, &ca, &ca_len, ret_msg);
        if (err)
                return err;
        id = xcalloc(1, sizeof(*id));
        id->ca.fd = -1;
        id->key = xstrdup(key);
        id->rv = xstrdup(rv ? rv : "");
        err = maas_endpoint_parse(ep, &id->endpoint, &why);
        if (err == 0) {
                free(why);
                why = NULL;
                err = maas_config_parse(ep, api_key, &id->cfg, &why);
                if (err)
                        *ret_msg = xasprintf("data.apiKey: %s", why ? why : cm_strerror(err));
        } else {
                *ret_msg = xasprintf("data.endpoint: %s", why ? why : cm_strerror(err));
        }
        if (err) {
                err = CM_EINVAL;
                goto out;
        }
        if (!hide_key(&id->cfg, api_key)) {
                *ret_msg = xstrdup("too many distinct MAAS keys seen by this process to keep "
                                   "them out of the logs; restart it");
                err = CM_EINVAL;
                goto out;
        }
        if (ca && memfile_open(&id->ca, "maas-ca", ca, ca_len) != 0) {
                *ret_msg = xstrdup("data.caBundle: cannot be handed to the TLS library");
                err = CM_EIO;
                goto out;
        }
        err = token_bucket_new(pool->qps, pool->burst, pool->clock, &id->budget);
        if (err) {
                *ret_msg = xstrdup("MAAS request budget");
                goto out;
        }
        atomic_store(&id->refs, 1);
        *ret = id;
        id = NULL;
out:
        if (api_key)
                explicit_bzero(api_key, strlen(api_key));
        free(api_key);
        free(ep);
        free(ca);
        free(why);
        if (id)
                ident_free(id);
        return err;
}

/* --- acquire -----------------------------------------------------------------------------------
 */

/* Records a failure on the slot with its next backoff step. Lock held. */
static void slot_fail(struct ident_slot *s, int err, const char *reason, char *msg, uint64_t now)
{
        free(s->message);
        s->err = err;
        s->reason = reason;
        s->message = msg;
        s->not_before_ms = now + backoff_delay_ms(&failure_backoff, s->failures);
        s->probe_until_ms = 0;
        if (s->failures < 16)
                s->failures++;
}

/* No failure in force; the backoff keeps growing until a call proves the identity. */
static void slot_clear(struct ident_slot *s)
{
        free(s->message);
        s->message = NULL;
        s->err = 0;
        s->reason = NULL;
        s->not_before_ms = 0;
        s->probe_until_ms = 0;
}

static void slot_ok(struct ident_slot *s)
{
        slot_clear(s);
        s->failures = 0;
}

static int slot_failure(const struct ident_slot *s, uint64_t now, struct maas_ident_failure *f)
{
        f->reason = s->reason;
        f->message = xstrdup(s->message ? s->message : "");
        if (s->not_before_ms > now)
                f->retry_ms = s->not_before_ms - now;
        else if (s->probe_until_ms > now && s->probe_until_ms - now < failure_backoff.base_ms)
                f->retry_ms = s->probe_until_ms - now;
        else
                f->retry_ms = failure_backoff.base_ms;
        return s->err;
}

/* What the identity's calls said since its last success turned into the slot's failure
 * (MAAS refused the key or is unreachable), after a Secret read found it unchanged. */
static bool outcome_failed(struct ident_slot *s, const char *key, uint64_t now)
{
        struct maas_ident *id = s->cur;

        if (atomic_load(&id->unauthorized)) {
                slot_fail(s, CM_EUNAUTHORIZED, "MAASUnauthorized",
                          xasprintf("MAAS at %s refused the apiKey of Secret %s (HTTP 401): "
                                    "put a valid key into the Secret",
                                    id->endpoint, key),
                          now);
                return true;
        }
        if (atomic_load(&id->unreachable)) {
                slot_fail(s, CM_ETRANSPORT, "MAASUnreachable",
                          xasprintf("MAAS at %s (Secret %s) cannot be reached", id->endpoint, key),
                          now);
                return true;
        }
        return false;
}

/* Reads the Secret (no lock held): 0 and *ret_json, or an error with *ret_reason and *ret_msg. */
static int read_secret(struct kube_client *kc,
                       const char *ns,
                       const char *secret,
                       cJSON **ret_json,
                       const char **ret_reason,
                       char **ret_msg)
{
        int err = kube_get(kc, &KUBE_RES_SECRETS, ns, secret, ret_json, NULL);

        if (err == CM_ENOTFOUND) {
                *ret_reason = "IdentitySecretNotFound";
                *ret_msg = xasprintf("Secret %s/%s named by spec.identityRef does not exist", ns,
                                     secret);
        } else if (err) {
                *ret_reason = "IdentityUnavailable";
                *ret_msg = xasprintf("Secret %s/%s named by spec.identityRef cannot be read: %s",
                                     ns, secret, cm_strerror(err));
        }
        return err;
}

/* The slot's identity handed out (a reference), or its failure. Lock held. */
static int slot_give(struct ident_slot *s,
                     uint64_t now,
                     struct maas_ident **ret,
                     struct maas_ident_failure *f)
{
        if (s->err)
                return slot_failure(s, now, f);
        *ret = maas_ident_ref(s->cur);
        return 0;
}

/* Installs what a Secret read gave (json, or err with reason and msg, which it takes). */
static int slot_update(struct maas_ident_pool *pool,
                       struct ident_slot *s,
                       const char *key,
                       const cJSON *json,
                       int err,
                       const char *reason,
                       char *msg,
                       struct maas_ident **ret,
                       struct maas_ident_failure *f)
{
        uint64_t now = clock_now_ms(pool->clock);
        const char *rv = json ? json_find_str(json, "metadata", "resourceVersion", NULL) : NULL;
        struct maas_ident *id = NULL;

        if (err == 0 && s->cur && rv && strcmp(s->cur->rv, rv) == 0) {
                /* unchanged: its calls' outcome decides */
                if (!outcome_failed(s, key, now)) {
                        if (atomic_load(&s->cur->proven))
                                slot_ok(s);
                        else
                                slot_clear(s);
                }
                return slot_give(s, now, ret, f);
        }
        if (err == 0) {
                err = ident_build(pool, key, json, &id, &msg);
                reason = "IdentityInvalid";
                if (err && msg) {
                        char *full = xasprintf("Secret %s named by spec.identityRef: %s", key, msg);

                        free(msg);
                        msg = full;
                }
        }
        if (err) {
                /* a Secret gone or broken stops its identity; a failed read keeps it */
                if (strcmp(reason, "IdentityUnavailable") != 0)
                        slot_retire(s);
                if (s->cur) {
                        free(msg);
                        return slot_give(s, now, ret, f);
                }
                slot_fail(s, err, reason, msg, now);
                return slot_failure(s, now, f);
        }
        id->serial = ++pool->serial;
        slot_retire(s);
        s->cur = id;
        slot_ok(s);
        log_info(LOGGER, "MAAS identity loaded", "identity=%s resourceVersion=%s endpoint=%s", key,
                 id->rv, id->endpoint);
        return slot_give(s, now, ret, f);
}

/* The resourceVersion a Secret read gave: "" when there is no such Secret, NULL when the
 * read failed otherwise (nothing is known). */
static const char *read_rv(const cJSON *json, int err)
{
        const char *rv;

        if (err == CM_ENOTFOUND)
                return "";
        if (err)
                return NULL;
        rv = json_find_str(json, "metadata", "resourceVersion", NULL);
        return rv ? rv : "";
}

/* Whether the read (json or err) shows another Secret than the one the slot last read. */
static bool secret_changed(const struct ident_slot *s, const cJSON *json, int err)
{
        const char *rv = read_rv(json, err);

        return rv && (!s->seen_rv || strcmp(rv, s->seen_rv) != 0);
}

static void seen_rv_set(struct ident_slot *s, const cJSON *json, int err)
{
        const char *rv = read_rv(json, err);

        if (!rv)
                return;
        free(s->seen_rv);
        s->seen_rv = xstrdup(rv);
}

/* What the identity's calls said since its flags were last reset: 1 MAAS refused the key or
 * was not reached, 0 a call succeeded, -1 no call has finished. */
static int ident_outcome(struct maas_ident *id)
{
        if (atomic_load(&id->unauthorized) || atomic_load(&id->unreachable))
                return 1;
        return atomic_load(&id->proven) ? 0 : -1;
}

static void ident_outcome_reset(struct maas_ident *id)
{
        atomic_store(&id->unauthorized, false);
        atomic_store(&id->unreachable, false);
        atomic_store(&id->proven, false);
}

/* How long the others wait for a probe: one MAAS request (its timeout) and the pass around
 * it. A probe whose pass made no call lets the next pass probe after that. */
static uint64_t probe_lease_ms(const struct maas_ident_pool *pool)
{
        uint64_t t = pool->timeout_ms;

        return (t < 1000 ? 1000 : t > 10000 ? 10000 : t) + 1000;
}

/* One acquire: the pool, the Secret and what the decision before the read found. */
struct acquire_ctx {
        struct maas_ident_pool *pool;
        const char *key;
        uint64_t now;
        bool poll;  /* a read during a backoff: only a changed Secret ends it */
        bool probe; /* the read after a backoff: claimed, the others wait for its outcome */
};

/* The probe out on s: 0 and *ret when it proved the identity (the backoff is over), a
 * failure while the others still wait for it, 1 when it is over otherwise (refused, not
 * reached, or its time passed). Lock held. */
static int probe_check(struct acquire_ctx *a,
                       struct ident_slot *s,
                       int outcome,
                       struct maas_ident **ret,
                       struct maas_ident_failure *f)
{
        if (s->cur && outcome == 0) {
                slot_ok(s);
                return slot_give(s, a->now, ret, f);
        }
        if (s->cur && outcome == 1)
                return 1; /* the caller records the next step of the backoff */
        if (a->now < s->probe_until_ms)
                return slot_failure(s, a->now, f);
        s->probe_until_ms = 0;
        return 1;
}

/* The pass reads the Secret: the others do not meanwhile (they go on with what is in force).
 * Lock held; returns false (acquire_decide's "read"). */
static bool claim_read(struct acquire_ctx *a, struct ident_slot *s)
{
        s->checked_ms = a->now;
        s->reading = true;
        return false;
}

/* Before any read (lock held): true when the pass is answered (*err, *ret or *f), false when
 * it reads the Secret (claimed: the others go on with what is in force meanwhile). */
static bool acquire_decide(struct acquire_ctx *a,
                           struct ident_slot *s,
                           struct maas_ident **ret,
                           struct maas_ident_failure *f,
                           int *err)
{
        int outcome = s->cur ? ident_outcome(s->cur) : -1;

        if (s->probe_until_ms) {
                *err = probe_check(a, s, outcome, ret, f);
                if (*err < 0 && a->now - s->checked_ms >= MAAS_IDENT_POLL_MS) {
                        /* still waiting for the probe: the Secret is read as in a backoff
                         * (a changed one ends it) */
                        maas_ident_failure_release(f);
                        *err = 0;
                        a->poll = true;
                        return claim_read(a, s);
                }
                if (*err <= 0)
                        return true;
        }
        if (s->cur && outcome == 1 && (!s->err || s->probe_until_ms)) {
                /* MAAS refused the key (or was not reached), in use or as the probe: the
                 * failure and its next backoff step are in force from now, before the lock
                 * goes, so no other pass calls MAAS with this identity meanwhile; the Secret
                 * is read at once (a changed one ends the backoff). */
                (void)outcome_failed(s, a->key, a->now);
                a->poll = true;
                return claim_read(a, s);
        }
        if (s->err && s->reading) {
                /* the negative cache: the failure stands until the read under way says
                 * otherwise (a missing Secret is one GET per identity, not one per pass) */
                *err = slot_failure(s, a->now, f);
                return true;
        }
        /* backing off: no MAAS call, and a Secret read only every MAAS_IDENT_POLL_MS */
        a->poll = s->err && a->now < s->not_before_ms;
        if (a->poll && a->now - s->checked_ms < MAAS_IDENT_POLL_MS) {
                *err = slot_failure(s, a->now, f);
                return true;
        }
        if (s->cur && !s->err && a->now - s->checked_ms < MAAS_IDENT_RECHECK_MS) {
                *err = slot_give(s, a->now, ret, f);
                return true;
        }
        /* the backoff passed: this pass reads the Secret and, unchanged, probes MAAS with
         * what it refused; the others wait for the outcome (one probe per backoff step) */
        a->probe = s->err && !a->poll;
        if (a->probe) {
                if (s->cur)
                        ident_outcome_reset(s->cur);
                s->probe_until_ms = a->now + probe_lease_ms(a->pool);
        }
        return claim_read(a, s);
}

static struct ident_slot *slot_get(struct maas_ident_pool *pool, const char *key)
{
        struct reconciler_entry *e = reconciler_table_get(&pool->idents, key);

        if (!e) { /* new, or forgotten meanwhile: no cluster named it */
                e = reconciler_table_put(&pool->idents, key);
                e->ptr = xcalloc(1, sizeof(struct ident_slot));
        }
        return e->ptr;
}

/* The probe's read found the Secret unchanged: the pass gets the identity (lock held). */
static bool probe_grant(struct acquire_ctx *a,
                        struct ident_slot *s,
                        const cJSON *json,
                        int err,
                        struct maas_ident **ret)
{
        const char *rv = json ? json_find_str(json, "metadata", "resourceVersion", NULL) : NULL;

        if (!a->probe || err || !s->cur || !s->err || !s->probe_until_ms || !rv ||
            strcmp(rv, s->cur->rv) != 0) {
                if (a->probe)
                        s->probe_until_ms = 0;
                return false;
        }
        seen_rv_set(s, json, err);
        s->probe_until_ms = clock_now_ms(a->pool->clock) + probe_lease_ms(a->pool);
        *ret = maas_ident_ref(s->cur);
        return true;
}

int maas_ident_acquire(struct maas_ident_pool *pool,
                       struct kube_client *kc,
                       const char *ns,
                       const char *secret,
                       struct maas_ident **ret,
                       struct maas_ident_failure *f)
{
        char *key = xasprintf("%s/%s", ns, secret);
        struct acquire_ctx a = { .pool = pool, .key = key, .now = clock_now_ms(pool->clock) };
        struct ident_slot *s;
        cJSON *json = NULL;
        const char *reason = NULL;
        char *msg = NULL;
        bool changed = false;
        int err = 0;

        *ret = NULL;
        *f = (struct maas_ident_failure){ 0 };
        pthread_mutex_lock(&pool->lock);
        if (acquire_decide(&a, slot_get(pool, key), ret, f, &err))
                goto unlock;
        pthread_mutex_unlock(&pool->lock);

        err = read_secret(kc, ns, secret, &json, &reason, &msg);

        pthread_mutex_lock(&pool->lock);
        s = slot_get(pool, key);
        s->checked_ms = clock_now_ms(pool->clock);
        s->reading = false;
        if (a.poll && !secret_changed(s, json, err)) { /* still backing off */
                free(msg);
                err = slot_failure(s, s->checked_ms, f);
                goto unlock;
        }
        if (probe_grant(&a, s, json, err, ret)) {
                free(msg);
                err = 0;
                goto unlock;
        }
        changed = a.poll;
        if (a.poll && s->cur) /* a new Secret: the backoff ends, its calls decide */
                ident_outcome_reset(s->cur);
        if (a.poll)
                slot_clear(s);
        if (s->err && s->cur && err == 0) /* the retry found another Secret: build it */
                slot_clear(s);
        seen_rv_set(s, json, err);
        err = slot_update(pool, s, key, json, err, reason, msg, ret, f);
unlock:
        pthread_mutex_unlock(&pool->lock);
        if (changed && pool->changed) {
                log_info(LOGGER, "identity Secret changed during its backoff: tried again",
                         "identity=%s", key);
                pool->changed(pool->changed_arg, ns, secret);
        }
        cJSON_Delete(json);
        free(key);
        return err;
}

size_t maas_ident_forget_unused(struct maas_ident_pool *pool)
{
        size_t gone = 0;

        pthread_mutex_lock(&pool->lock);
        for (size_t i = pool->idents.n; i-- > 0;) {
                const char *key = pool->idents.items[i].key;
                bool used = false;

                for (size_t j = 0; j < pool->clusters.n && !used; j++)
                        used = strcmp(pool->clusters.items[j].ptr, key) == 0;
                if (used)
                        continue;
                budget_forget(pool, key);
                slot_free(pool->idents.items[i].ptr);
                reconciler_table_del(&pool->idents, key);
                gone++;
        }
        for (size_t i = pool->zones.n; i-- > 0;) {
                const char *key = pool->zones.items[i].key;
                bool used = false;

                for (size_t j = 0; j < pool->clusters.n && !used; j++)
                        used = strcmp(pool->clusters.items[j].ptr, key) == 0;
                if (!used)
                        reconciler_table_del(&pool->zones, key);
        }
        pthread_mutex_unlock(&pool->lock);
        return gone;
}

size_t maas_ident_count(struct maas_ident_pool *pool)
{
        size_t n = 0;

        pthread_mutex_lock(&pool->lock);
        for (size_t i = 0; i < pool->idents.n; i++)
                n += ((struct ident_slot *)pool->idents.items[i].ptr)->cur != NULL;
        pthread_mutex_unlock(&pool->lock);
        return n;
}
