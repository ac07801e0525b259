#pragma once
/*
 * maas_identity: per-cluster MAAS credentials (docs/credentials.md, issue 21; internal). A
 * MaasCluster's spec.identityRef names a Secret of its namespace holding `endpoint`, `apiKey`
 * and optionally `caBundle` (PEM); the machines and the DNS record of that cluster use that
 * MAAS. A cluster without identityRef uses the process-wide MAAS (p->maas, the worker's own
 * client, p->maas_budget and p's fleet lists), exactly as before: none of this is touched.
 *
 * The pool (one per provider) keeps two tables under its own lock:
 *  - clusters: "ns/cluster" (the CAPI Cluster's name) -> "ns/secret", kept by the MaasCluster
 *    informer's handlers, so a MaasMachine pass and the fleet lists know a cluster's MAAS
 *    without reading an object; an empty table is the single-MAAS fast path (one atomic load);
 *  - identities: "ns/secret" -> the identity built from the Secret at one resourceVersion, and
 *    the failure that stops it (missing Secret, malformed data, MAAS answered 401, MAAS
 *    unreachable) with its backoff (1 s doubling to 60 s), so a broken identity costs one
 *    Secret GET and at most one MAAS probe per backoff step, never a retry storm. The
 *    failure is the identity's negative cache: while one acquire reads the Secret, the
 *    others get the failure in force without a read of their own (the passes of a cluster's
 *    many MaasMachines come back together when a backoff step runs out). The first refusal
 *    seen is recorded as the failure before the lock goes (then the Secret is read), and
 *    when a step runs out one pass gets the identity as the probe while the others get the
 *    failure until the probe's calls tell (maas_ident_observe) or its lease (the request
 *    timeout, at most 10 s, + 1 s) runs out; the Secret is still read every
 *    MAAS_IDENT_POLL_MS meanwhile.
 *
 * The Secret is read by name (GET) with the calling worker's kube client: when first needed,
 * again MAAS_IDENT_RECHECK_MS after the last read (one worker re-reads, the others go on
 * with the current identity meanwhile), and at once after MAAS refused its key. A changed
 * resourceVersion builds a new identity; the old one is retired.
 *
 * struct maas_ident is immutable once built, except refs, its outcome flags and its fleet
 * lists (guarded by p->fleet_lock, fleet_snapshot.c). Reference counting: the pool holds one
 * while it is the current identity of its Secret; each pass holds one from maas_ident_acquire
 * to maas_ident_put; each worker client of it (worker.c) holds one. A retired identity is no
 * longer handed out: passes running on it finish on it (in-flight work keeps the old key),
 * workers drop their clients of it at their next use of the pool, and the last put frees it.
 * An identity no cluster names any more is retired and forgotten (maas_ident_forget_unused).
 *
 * Secrets: the apiKey, its token key and token secret are registered with the log redaction
 * before the identity is used; no message of this module contains any of them.
 *
 * Threads: every function may be called from any thread. Lock order: p->fleet_index_lock,
 * then the pool's lock; no Kubernetes or MAAS call is made while holding it (a Secret is
 * read without it), and only the log's own lock is taken inside it.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"
#include "maas_client.h"
#include "memfile.h"
#include "reconciler.h"

struct kube_client;
struct kube_object;
struct maas_ident_pool;
struct metrics;

#define MAAS_IDENT_RECHECK_MS 10000u
/* While an identity backs off, its Secret is read again at most this often: a changed one
 * (another resourceVersion) ends the backoff at once. */
#define MAAS_IDENT_POLL_MS    5000u

struct maas_ident {
        char *key;       /* "ns/secret" */
        char *rv;        /* the Secret's resourceVersion it was built from */
        uint64_t serial; /* unique in the process: worker clients are matched on it */
        struct maas_config cfg;
        char *endpoint;                  /* the API base URL, for messages */
        struct memfile ca;               /* caBundle as a file for libcurl; fd -1 without one */
        struct token_bucket *budget;     /* this MAAS's request budget (--maas-api-qps) */
        struct reconciler_fleets fleets; /* this MAAS's lists (p->fleet_lock) */
        _Atomic unsigned refs;
        atomic_bool retired;
        atomic_bool unauthorized; /* a call was answered 401 since the last success */
        atomic_bool unreachable;  /* a call found no MAAS since the last success */
        atomic_bool proven;       /* a call succeeded (the failure backoff starts over) */
};

/* Why a cluster's MAAS cannot be used now: the condition's reason and message (no key in
 * it) and when to try again. Owned by the caller (maas_ident_failure_release). */
struct maas_ident_failure {
        const char *reason; /* static: IdentitySecretNotFound, IdentityInvalid, MAASUnauthorized,
                             * MAASUnreachable, IdentityUnavailable */
        char *message;
        uint64_t retry_ms;
};

void maas_ident_failure_release(struct maas_ident_failure *f);

struct maas_ident_pool_opts {
        double qps;     /* each identity's budget: --maas-api-qps (<= 0 = unlimited) */
        unsigned burst; /* --maas-api-burst */
        const struct clock_ops *clock; /* NULL = system */
        uint32_t timeout_ms;           /* per MAAS request (the workers' transports) */
        /* borrowed, may be NULL: gets capmaas_maas_identity_budget_*{identity="ns/secret"},
         * each identity's series dropped when it is forgotten */
        struct metrics *metrics;
        /* called (no lock held, on the acquiring thread) when a read during a backoff found
         * the Secret ns/secret changed: the backoff ended, its objects may come back now */
        void (*changed)(void *arg, const char *ns, const char *secret);
        void *changed_arg;
};

MUST_CHECK int maas_ident_pool_new(const struct maas_ident_pool_opts *o,
                                   struct maas_ident_pool **ret);
/* Frees the pool and every identity it still holds (provider teardown: no pass runs). */
struct maas_ident_pool *maas_ident_pool_free(struct maas_ident_pool *pool);
/* Per-request timeout the pool was given. */
uint32_t maas_ident_pool_timeout_ms(const struct maas_ident_pool *pool);

/* --- clusters (the MaasCluster informer's handlers, provider.c) --- */
/* Records which Secret the MaasCluster obj names for its Cluster (by its cluster-name label,
 * else its Cluster owner reference), or forgets it when it names none. */
void maas_ident_cluster_put(struct maas_ident_pool *pool, const struct kube_object *obj);
void maas_ident_cluster_del(struct maas_ident_pool *pool, const struct kube_object *obj);
/* Whether any cluster names a Secret (the fast path: false = everything uses the default). */
bool maas_ident_any(const struct maas_ident_pool *pool);
/* The name of the Secret (in ns) cluster ns/cluster names (new string), or NULL: the default. */
char *maas_ident_of_cluster(struct maas_ident_pool *pool, const char *ns, const char *cluster);
/* Whether the records of cluster_key ("ns/cluster") belong to the identity ident_key (NULL =
 * the default). Pool lock taken; for the fleet lists' collection. */
bool maas_ident_cluster_is(struct maas_ident_pool *pool,
                           const char *cluster_key,
                           const char *ident_key);

/* The clusters ("ns/cluster" keys, a new array of new strings in *ret) naming Secret
 * ident_key ("ns/secret"); returns how many. */
size_t maas_ident_clusters_naming(struct maas_ident_pool *pool, const char *ident_key, char ***ret);
/* Records digest as the zone set last seen in the inventory of ident_key's MAAS; true when
 * it differs from the one recorded before (or none was). Forgotten with the identity. */
bool maas_ident_zones_changed(struct maas_ident_pool *pool, const char *ident_key, uint64_t digest);

/* --- identities --- */
/*
 * The current identity of Secret ns/secret, with a reference (maas_ident_put it), reading
 * the Secret through kc when due. 0 and *ret; otherwise a negative code (CM_ENOTFOUND: no
 * such Secret; CM_EINVAL: malformed data; CM_EUNAUTHORIZED: MAAS refused the key;
 * CM_ETRANSPORT: MAAS unreachable; others: the Secret could not be read) and *f filled.
 */
MUST_CHECK int maas_ident_acquire(struct maas_ident_pool *pool,
                                  struct kube_client *kc,
                                  const char *ns,
                                  const char *secret,
                                  struct maas_ident **ret,
                                  struct maas_ident_failure *f);
struct maas_ident *maas_ident_ref(struct maas_ident *id);
/* Accepts NULL. */
void maas_ident_put(struct maas_ident *id);
/* The maas_client_opts.observe of a client of id (ud: the identity). */
void maas_ident_observe(void *ud, int err);
/* Retires and forgets identities no cluster names any more; returns how many. */
size_t maas_ident_forget_unused(struct maas_ident_pool *pool);
/* How many identities the pool holds as current (tests, metrics). */
size_t maas_ident_count(struct maas_ident_pool *pool);
