/*
 * maas_inventories: one inventory cache per per-cluster MAAS, for admission (see
 * maas_inventories.h).
 */
#include "maas_inventories.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "log.h"
#include "maas_client.h"
#include "maas_inventory.h"
#include "memfile.h"
#include "provider.h"
#include "token_bucket.h"
#include "webhooks.h"
#include "xalloc.h"

extern char **environ;

#define LOGGER           "maas-inventories"
#define RECHECK_MS       10000u
#define KUBE_TIMEOUT_MS  5000u
#define INV_CALL_TIMEOUT 10000u
#define CLUSTERS_MAX     4096u /* clusters remembered (a template's label names any) */
#define MISS_RECHECK_MS  5000u /* a missing or malformed Secret is read again after this */
#define MISSES_MAX       256u  /* unusable Secrets remembered */

/* One identity's inventory: a Secret at one resourceVersion. */
struct inv_entry {
        char *key; /* "ns/secret" */
        char *rv;
        struct maas_inventory *inv;
        struct memfile ca;
        struct token_bucket *budget;
        unsigned refs; /* the cache's (while listed) and each acquire's; under lock */
        bool listed;
        uint64_t used_ms, checked_ms;
        struct maas_inventories *mi; /* its cache: the refresh listener's */
        struct inv_entry *next;      /* every entry alive, listed or still held (mi->all);
                                      * once out of it, the list of those to free */
};

/* A Secret that could not be used (missing, malformed): the negative cache. */
struct miss_entry {
        char *key; /* "ns/secret" */
        char *why;
        int err;
        uint64_t checked_ms;
};

/* What a cluster names: "ns/cluster" -> secret name ("" = no identityRef). */
struct cluster_entry {
        char *key;
        char *secret;
        uint64_t checked_ms;
};

struct maas_inventories {
        pthread_mutex_t lock;    /* the tables and refs */
        pthread_mutex_t io_lock; /* the kube client */
        struct kube_config kube; /* with kc, made on first use (io_lock) */
        struct kube_client *kc;
        uint64_t kube_tried_ms;
        struct inv_entry **inv; /* max slots (--maas-identity-cache-max) */
        size_t max;
        struct inv_entry *all;
        struct cluster_entry *clusters;
        size_t n_clusters, cap_clusters;
        struct miss_entry misses[MISSES_MAX]; /* lock */
        size_t n_misses;
        const struct config *cfg;
        const struct clock_ops *clock;
        struct webhooks_inventory_source source;
        struct provider_inventory_source provider_source;
        /* the controllers' refresh listener, called under listen_lock (set_listener waits
         * for a call in flight) */
        pthread_mutex_t listen_lock;
        provider_ident_inventory_fn *listen_fn;
        void *listen_arg;
};

static void entry_free(struct inv_entry *e)
{
        if (!e)
                return;
        maas_inventory_free(e->inv);
        token_bucket_free(e->budget);
        memfile_close(&e->ca);
        free(e->key);
        free(e->rv);
        free(e);
}

/* Drops a reference (lock held); after the last one, e leaves mi->all and is returned for
 * entry_free outside the lock (it joins the refresher thread). */
static struct inv_entry *entry_put_locked(struct maas_inventories *mi, struct inv_entry *e)
{
        if (--e->refs > 0)
                return NULL;
        for (struct inv_entry **at = &mi->all; *at; at = &(*at)->next)
                if (*at == e) {
                        *at = e->next;
                        break;
                }
        e->next = NULL;
        return e;
}

/* Puts e (NULL: nothing), out of mi->all, on the list *gone of entries to free. */
static void gone_push(struct inv_entry **gone, struct inv_entry *e)
{
        if (!e)
                return;
        e->next = *gone;
        *gone = e;
}

/* Frees the entries of list gone (no lock held). */
static void gone_free(struct inv_entry *gone)
{
        while (gone) {
                struct inv_entry *next = gone->next;

                entry_free(gone);
                gone = next;
        }
}

/* --- clusters -------------------------------------------------------------------------------- */

static struct cluster_entry *cluster_find(struct maas_inventories *mi, const char *key)
{
        for (size_t i = 0; i < mi->n_clusters; i++)
                if (strcmp(mi->clusters[i].key, key) == 0)
                        return &mi->clusters[i];
        return NULL;
}

static void clusters_clear(struct maas_inventories *mi)
{
        for (size_t i = 0; i < mi->n_clusters; i++) {
                free(mi->clusters[i].key);
                free(mi->clusters[i].secret);
        }
        mi->n_clusters = 0;
}

/* The Kubernetes client, made on first use (the API server may come up after the webhook
 * server), at most one attempt per RECHECK_MS. io_lock held. */
static int kube_ready(struct maas_inventories *mi, char **ret_why)
{
        uint64_t now = clock_now_ms(mi->clock);
        char *why = NULL;
        int r;

        if (mi->kc)
                return 0;
        if (mi->kube_tried_ms && now - mi->kube_tried_ms < RECHECK_MS) {
                *ret_why = xstrdup("no Kubernetes configuration to read the cluster's MaasCluster");
                return CM_EINVAL;
        }
        mi->kube_tried_ms = now;
        r = kube_config_load(mi->cfg->kubeconfig, environ, &mi->kube, &why);
        if (r == 0)
                r = kube_client_new(&(struct kube_client_opts){ .config = &mi->kube,
                                                                .timeout_ms = KUBE_TIMEOUT_MS,
                                                                .max_retries = 1 },
                                    &mi->kc);
        if (r < 0) {
                *ret_why = xasprintf("cannot read the cluster's MaasCluster: %s",
                                     why ? why : cm_strerror(r));
                kube_config_release(&mi->kube);
        }
        free(why);
        return r;
}

/* The Secret cluster ns/name names: *ret_secret (new, "" for none). kube under io_lock. */
static int read_cluster(struct maas_inventories *mi,
                        const char *ns,
                        const char *cluster,
                        char **ret_secret,
                        char **ret_why)
{
        char *sel = xasprintf("cluster.x-k8s.io/cluster-name=%s", cluster);
        cJSON *l = NULL;
        const cJSON *item;
        const char *name;
        int err;

        err = kube_ready(mi, ret_why);
        if (err) {
                free(sel);
                return err;
        }
        err = kube_list(mi->kc, &KUBE_RES_MAASCLUSTERS, ns,
                        &(struct kube_list_opts){ .label_selector = sel }, &l, NULL);
        free(sel);
        if (err) {
                *ret_why = xasprintf("the MaasCluster of cluster %s/%s cannot be read: %s", ns,
                                     cluster, cm_strerror(err));
                return err;
        }
        item = cJSON_GetArrayItem(json_find(l, "items", NULL), 0);
        name = item ? json_find_str(item, "spec", "identityRef", "name", NULL) : NULL;
        *ret_secret = xstrdup(name ? name : "");
        cJSON_Delete(l);
        return 0;
}

/* Secret name (new string, "" = the default MAAS) of ns/cluster, read when not known within
 * RECHECK_MS. */
static int cluster_secret(struct maas_inventories *mi,
                          const char *ns,
                          const char *cluster,
                          char **ret,
                          char **ret_why)
{
        char *key = xasprintf("%s/%s", ns, cluster);
        uint64_t now = clock_now_ms(mi->clock);
        struct cluster_entry *c;
        char *secret = NULL;
        int err = 0;

        pthread_mutex_lock(&mi->lock);
        c = cluster_find(mi, key);
        if (c && now - c->checked_ms < RECHECK_MS)
                secret = xstrdup(c->secret);
        pthread_mutex_unlock(&mi->lock);
        if (secret)
                goto out;
        pthread_mutex_lock(&mi->io_lock);
        err = read_cluster(mi, ns, cluster, &secret, ret_why);
        pthread_mutex_unlock(&mi->io_lock);
        if (err)
                goto out;
        pthread_mutex_lock(&mi->lock);
        c = cluster_find(mi, key);
        if (!c && mi->n_clusters == CLUSTERS_MAX) /* labels name anything: start over */
                clusters_clear(mi);
        if (!c) {
                if (mi->n_clusters == mi->cap_clusters) {
                        mi->cap_clusters = mi->cap_clusters ? mi->cap_clusters * 2 : 16;
                        mi->clusters =
                                xrealloc(mi->clusters, mi->cap_clusters * sizeof(*mi->clusters));
                }
                c = &mi->clusters[mi->n_clusters++];
                c->key = xstrdup(key);
                c->secret = NULL;
        }
        free(c->secret);
        c->secret = xstrdup(secret);
        c->checked_ms = now;
        pthread_mutex_unlock(&mi->lock);
out:
        free(key);
        *ret = secret;
        return err;
}

/* --- the negative cache ----------------------------------------------------------------------- */

static struct miss_entry *miss_find(struct maas_inventories *mi, const char *key)
{
        for (size_t i = 0; i < mi->n_misses; i++)
                if (strcmp(mi->misses[i].key, key) == 0)
                        return &mi->misses[i];
        return NULL;
}

static void miss_drop(struct maas_inventories *mi, struct miss_entry *m)
{
        free(m->key);
        free(m->why);
        *m = mi->misses[--mi->n_misses];
}

/* The failure Secret key gave within MISS_RECHECK_MS (its code, and *ret_why), else 0 (and
 * an older one forgotten). Lock held. */
static int miss_get(struct maas_inventories *mi, const char *key, uint64_t now, char **ret_why)
{
        struct miss_entry *m = miss_find(mi, key);

        if (!m)
                return 0;
        if (now - m->checked_ms >= MISS_RECHECK_MS) {
                miss_drop(mi, m);
                return 0;
        }
        *ret_why = xstrdup(m->why);
        return m->err;
}

/* Remembers that Secret key could not be used (err, why: copied), or, with err 0, forgets
 * it. Lock held. */
static void miss_set(
        struct maas_inventories *mi, const char *key, int err, const char *why, uint64_t now)
{
        struct miss_entry *m = miss_find(mi, key);

        if (!err) {
                if (m)
                        miss_drop(mi, m);
                return;
        }
        if (!m && mi->n_misses == MISSES_MAX) /* the oldest goes */
                for (size_t i = 0; i < mi->n_misses; i++)
                        if (!m || mi->misses[i].checked_ms < m->checked_ms)
                                m = &mi->misses[i];
        if (!m) {
                m = &mi->misses[mi->n_misses++];
                *m = (struct miss_entry){ .key = xstrdup(key) };
        } else if (strcmp(m->key, key) != 0) {
                free(m->key);
                m->key = xstrdup(key);
        }
        free(m->why);
        m->why = xstrdup(why ? why : cm_strerror(err));
        m->err = err;
        m->checked_ms = now;
}

static void misses_clear(struct maas_inventories *mi)
{
        while (mi->n_misses)
                miss_drop(mi, &mi->misses[mi->n_misses - 1]);
}

/* --- inventories ----------------------------------------------------------------------------- */

static struct inv_entry *inv_find(struct maas_inventories *mi, const char *key)
{
        for (size_t i = 0; i < mi->max; i++)
                if (mi->inv[i] && strcmp(mi->inv[i]->key, key) == 0)
                        return mi->inv[i];
        return NULL;
}

/* On e's refresh thread: tells the controllers' listener, if any, which identity it is. */
static void on_refresh(void *ud, const struct maas_inventory_snapshot *snap)
{
        struct inv_entry *e = ud;
        struct maas_inventories *mi = e->mi;
        const char *slash = strchr(e->key, '/');
        char *ns = xstrndup(e->key, (size_t)(slash - e->key));

        pthread_mutex_lock(&mi->listen_lock);
        if (mi->listen_fn)
                mi->listen_fn(mi->listen_arg, ns, slash + 1, snap);
        pthread_mutex_unlock(&mi->listen_lock);
        free(ns);
}

/* A new entry from the Secret's JSON (io_lock held, not lock). */
static int inv_build(struct maas_inventories *mi,
                     const char *key,
                     const cJSON *secret,
                     struct inv_entry **ret,
                     char **ret_why)
{
        struct inv_entry *e = xcalloc(1, sizeof(*e));
        char *ep = NULL, *api_key = NULL, *ca = NULL, *msg = NULL;
        struct maas_config mc = { 0 };
        size_t ca_len = 0;
        int err;

        e->ca.fd = -1;
        err = maas_secret_parse(secret, &ep, &api_key, &ca, &ca_len, &msg);
        if (err == 0) {
                err = maas_config_parse(ep, api_key, &mc, &msg);
                /* never written: the whole key, its token key and its secret */
                (void)log_add_secret(api_key);
                if (err == 0) {
                        (void)log_add_secret(mc.creds.token_key);
                        (void)log_add_secret(mc.creds.token_secret);
                }
        }
        if (err == 0 && ca && memfile_open(&e->ca, "maas-ca", ca, ca_len) != 0)
                err = CM_EIO;
        if (err == 0)
                err = token_bucket_new(mi->cfg->maas_api_qps, mi->cfg->maas_api_burst, NULL,
                                       &e->budget);
        if (err == 0)
                err = maas_inventory_new(
                        &(struct maas_inventory_opts){
                                .cfg = &mc,
                                .http = { .ca_file = e->ca.fd >= 0 ? e->ca.path : NULL },
                                .interval_ms = mi->cfg->maas_inventory_interval_ms,
                                .call_timeout_ms = INV_CALL_TIMEOUT,
                                .budget = e->budget },
                        &e->inv);
        if (err) {
                *ret_why = xasprintf("Secret %s named by the cluster's spec.identityRef: %s", key,
                                     msg ? msg : cm_strerror(err));
                entry_free(e);
                e = NULL;
        } else {
                const char *rv = json_find_str(secret, "metadata", "resourceVersion", NULL);

                e->key = xstrdup(key);
                e->rv = xstrdup(rv ? rv : "");
                e->mi = mi;
                maas_inventory_set_listener(e->inv, on_refresh, e);
                log_info(LOGGER, "MAAS inventory for an identity", "identity=%s endpoint=%s", key,
                         mc.base_url);
        }
        if (api_key)
                explicit_bzero(api_key, strlen(api_key));
        free(api_key);
        free(ep);
        free(ca);
        free(msg);
        maas_config_release(&mc);
        *ret = e;
        return err;
}

/* The slot for an entry of key: its Secret's old one, else a free one, else the least
 * recently used. Lock held. */
static size_t inv_slot(const struct maas_inventories *mi, const char *key)
{
        size_t free_at = mi->max, lru = 0;

        for (size_t i = 0; i < mi->max; i++) {
                const struct inv_entry *o = mi->inv[i];

                if (o && strcmp(o->key, key) == 0)
                        return i;
                if (!o && free_at == mi->max)
                        free_at = i;
                if (o && mi->inv[lru] && o->used_ms < mi->inv[lru]->used_ms)
                        lru = i;
        }
        return free_at < mi->max ? free_at : lru;
}

/* Lists e (the cache's reference) in its slot; what it displaced is returned for freeing
 * when nobody holds it any more. Lock held. */
static struct inv_entry *inv_install(struct maas_inventories *mi, struct inv_entry *e)
{
        size_t at = inv_slot(mi, e->key);
        struct inv_entry *old = mi->inv[at];

        mi->inv[at] = e;
        e->listed = true;
        e->refs = 1;
        e->next = mi->all;
        mi->all = e;
        if (!old)
                return NULL;
        old->listed = false;
        return entry_put_locked(mi, old);
}

/* Entries unused for MAAS_INVENTORIES_IDLE_MS leave the cache (lock held); the ones nobody
 * holds join the list *gone for freeing. */
static void inv_sweep(struct maas_inventories *mi, uint64_t now, struct inv_entry **gone)
{
        for (size_t i = 0; i < mi->max; i++) {
                struct inv_entry *e = mi->inv[i];

                if (!e || now - e->used_ms < MAAS_INVENTORIES_IDLE_MS)
                        continue;
                mi->inv[i] = NULL;
                e->listed = false;
                gone_push(gone, entry_put_locked(mi, e));
        }
}

/* The entry of Secret ns/secret with a reference: the cached one when checked within
 * RECHECK_MS or its resourceVersion is unchanged, else a new one. */
static int inv_get(struct maas_inventories *mi,
                   const char *ns,
                   const char *secret,
                   struct inv_entry **ret,
                   char **ret_why)
{
        char *key = xasprintf("%s/%s", ns, secret);
        struct inv_entry *e, *gone = NULL;
        uint64_t now = clock_now_ms(mi->clock);
        cJSON *json = NULL;
        int err = 0;

        pthread_mutex_lock(&mi->lock);
        inv_sweep(mi, now, &gone);
        e = inv_find(mi, key);
        if (e && now - e->checked_ms < RECHECK_MS) {
                e->refs++;
                e->used_ms = now;
        } else {
                e = NULL;
                err = miss_get(mi, key, now, ret_why);
        }
        pthread_mutex_unlock(&mi->lock);
        if (e || err)
                goto out;

        pthread_mutex_lock(&mi->io_lock);
        pthread_mutex_lock(&mi->lock); /* another lookup may have read it meanwhile */
        err = miss_get(mi, key, clock_now_ms(mi->clock), ret_why);
        pthread_mutex_unlock(&mi->lock);
        if (err)
                goto unlock;
        err = kube_ready(mi, ret_why);
        if (err)
                goto unlock;
        err = kube_get(mi->kc, &KUBE_RES_SECRETS, ns, secret, &json, NULL);
        if (err) {
                *ret_why =
                        err == CM_ENOTFOUND
                                ? xasprintf("Secret %s named by the cluster's spec.identityRef "
                                            "does not exist",
                                            key)
                                : xasprintf("Secret %s cannot be read: %s", key, cm_strerror(err));
                if (err == CM_ENOTFOUND) { /* the API server failing is not remembered */
                        pthread_mutex_lock(&mi->lock);
                        miss_set(mi, key, err, *ret_why, now);
                        pthread_mutex_unlock(&mi->lock);
                }
        } else {
                const char *rv = json_find_str(json, "metadata", "resourceVersion", NULL);

                pthread_mutex_lock(&mi->lock);
                e = inv_find(mi, key);
                if (e && rv && strcmp(e->rv, rv) == 0) { /* unchanged */
                        e->refs++;
                        e->used_ms = e->checked_ms = now;
                } else {
                        e = NULL;
                }
                pthread_mutex_unlock(&mi->lock);
                if (!e)
                        err = inv_build(mi, key, json, &e, ret_why);
                pthread_mutex_lock(&mi->lock);
                miss_set(mi, key, err, err ? *ret_why : NULL, now);
                pthread_mutex_unlock(&mi->lock);
                if (!e || err)
                        goto unlock;
                pthread_mutex_lock(&mi->lock);
                if (!e->listed) {
                        gone_push(&gone, inv_install(mi, e));
                        e->refs++;
                        e->used_ms = e->checked_ms = now;
                }
                pthread_mutex_unlock(&mi->lock);
        }
unlock:
        pthread_mutex_unlock(&mi->io_lock);
out:
        gone_free(gone);
        cJSON_Delete(json);
        free(key);
        *ret = err ? NULL : e;
        return err;
}

/* --- the webhooks' source -------------------------------------------------------------------- */

static int source_acquire(
        void *ud, const char *ns, const char *cluster, struct maas_inventory **ret, char **ret_why)
{
        struct maas_inventories *mi = ud;
        struct inv_entry *e = NULL;
        char *secret = NULL;
        int err;

        *ret = NULL;
        err = cluster_secret(mi, ns, cluster, &secret, ret_why);
        if (err == 0 && *secret)
                err = inv_get(mi, ns, secret, &e, ret_why);
        if (e)
                *ret = e->inv;
        free(secret);
        return err;
}

static void source_release(void *ud, struct maas_inventory *inv)
{
        struct maas_inventories *mi = ud;
        struct inv_entry *gone = NULL;

        pthread_mutex_lock(&mi->lock);
        for (struct inv_entry *e = mi->all; e; e = e->next)
                if (e->inv == inv) {
                        gone = entry_put_locked(mi, e); /* the last one when it left the cache */
                        break;
                }
        pthread_mutex_unlock(&mi->lock);
        entry_free(gone);
}

/* --- the controllers' source ------------------------------------------------------------------ */

static int provider_acquire(
        void *ud, const char *ns, const char *secret, struct maas_inventory **ret, char **ret_why)
{
        struct inv_entry *e = NULL;
        int err = inv_get(ud, ns, secret, &e, ret_why);

        *ret = e ? e->inv : NULL;
        return err;
}

static void provider_set_listener(void *ud, provider_ident_inventory_fn *fn, void *arg)
{
        struct maas_inventories *mi = ud;

        pthread_mutex_lock(&mi->listen_lock);
        mi->listen_fn = fn;
        mi->listen_arg = arg;
        pthread_mutex_unlock(&mi->listen_lock);
}

size_t maas_inventories_count(struct maas_inventories *mi)
{
        size_t n = 0;

        pthread_mutex_lock(&mi->lock);
        for (size_t i = 0; i < mi->max; i++)
                n += mi->inv[i] != NULL;
        pthread_mutex_unlock(&mi->lock);
        return n;
}

const struct provider_inventory_source *maas_inventories_provider_source(
        struct maas_inventories *mi)
{
        return mi ? &mi->provider_source : NULL;
}

const struct webhooks_inventory_source *maas_inventories_source(struct maas_inventories *mi)
{
        return mi ? &mi->source : NULL;
}

int maas_inventories_new(const struct config *cfg, struct maas_inventories **ret, char **reterr)
{
        return maas_inventories_new_clock(cfg, NULL, ret, reterr);
}

int maas_inventories_new_clock(const struct config *cfg,
                               const struct clock_ops *clock,
                               struct maas_inventories **ret,
                               char **reterr)
{
        struct maas_inventories *mi = xcalloc(1, sizeof(*mi));

        (void)reterr;
        pthread_mutex_init(&mi->lock, NULL);
        pthread_mutex_init(&mi->io_lock, NULL);
        mi->cfg = cfg;
        mi->max = cfg->maas_identity_cache_max ? cfg->maas_identity_cache_max
                                               : MAAS_INVENTORIES_DEFAULT_MAX;
        mi->inv = xcalloc(mi->max, sizeof(*mi->inv));
        pthread_mutex_init(&mi->listen_lock, NULL);
        mi->clock = clock;
        mi->source = (struct webhooks_inventory_source){ .acquire = source_acquire,
                                                         .release = source_release,
                                                         .ud = mi };
        mi->provider_source =
                (struct provider_inventory_source){ .acquire = provider_acquire,
                                                    .release = source_release,
                                                    .set_listener = provider_set_listener,
                                                    .ud = mi };
        *ret = mi;
        return CM_OK;
}

struct maas_inventories *maas_inventories_free(struct maas_inventories *mi)
{
        if (!mi)
                return NULL;
        while (mi->all) { /* nothing is held: the webhook server has stopped */
                struct inv_entry *e = mi->all;

                mi->all = e->next;
                entry_free(e);
        }
        clusters_clear(mi);
        free(mi->clusters);
        free(mi->inv);
        misses_clear(mi);
        kube_client_free(mi->kc);
        kube_config_release(&mi->kube);
        pthread_mutex_destroy(&mi->lock);
        pthread_mutex_destroy(&mi->io_lock);
        pthread_mutex_destroy(&mi->listen_lock);
        free(mi);
        return NULL;
}
