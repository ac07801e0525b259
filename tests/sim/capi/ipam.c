/*
 * capi-sim IPAM: the in-cluster IPAM provider (kubernetes-sigs/cluster-api-ipam-provider-
 * in-cluster) as an infrastructure provider sees it (see capi.h). Its claim reconcile:
 *
 *   1. a claim of a pool kind it does not serve is not its own: left alone;
 *   2. the claim's Cluster (spec.clusterName, else the cluster-name label) paused or, for a
 *      claim not being deleted, missing: nothing is done;
 *   3. the ReleaseAddress finalizer first (that write ends the pass);
 *   4. a deleting claim: its IPAddress loses ProtectAddress and is deleted, then the claim
 *      loses ReleaseAddress;
 *   5. else the IPAddress named after the claim (kept when it exists), with the lowest free
 *      address of the pool (no address is handed out twice: one worker, and a created
 *      IPAddress is waited for in the cache before the next claim), owned by the claim
 *      (controller) and the pool, with ProtectAddress; then status.addressRef.
 *
 * Pools are IPv4 only here. The real provider serves IPv6 too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "patch_helper.h"
#include "rfc3339.h"
#include "schema.h"
#include "xalloc.h"

#define LOGGER         "capi-sim"
/* How long a created IPAddress is waited for in the cache (the real provider: 5 s). */
#define CACHE_WAIT_MS  5000
#define CACHE_POLL_MS  5
#define REASON_MAX     512
#define CLAIM_RETRY_MS 2000

struct kube_resource CAPI_RES_IPCLAIMS, CAPI_RES_IPADDRESSES;
const struct kube_resource CAPI_RES_POOLS = { CAPI_IPAM_GROUP, "v1alpha2", "inclusterippools",
                                              CAPI_KIND_POOL, true };
const struct kube_resource CAPI_RES_GLOBAL_POOLS = { CAPI_IPAM_GROUP, "v1alpha2",
                                                     "globalinclusterippools",
                                                     CAPI_KIND_GLOBAL_POOL, false };

/* One claim pass. */
struct cctx {
        struct capi_worker *w;
        const char *ns, *name;
        struct kube_object *claim;
        cJSON *after; /* the claim as this pass leaves it */
        const char *pool_kind, *pool_name;
        bool global;
};

static bool serves(const cJSON *ref, bool *ret_global)
{
        const char *g = json_find_str(ref, "apiGroup", NULL);
        const char *k = json_find_str(ref, "kind", NULL);

        if (!g || !k || strcmp(g, CAPI_IPAM_GROUP) != 0)
                return false;
        *ret_global = strcmp(k, CAPI_KIND_GLOBAL_POOL) == 0;
        return *ret_global || strcmp(k, CAPI_KIND_POOL) == 0;
}

/* Whether ref (an IPAddress's spec.poolRef) names this pool. */
static bool same_pool(const cJSON *ref, const char *kind, const char *name)
{
        const char *g = json_find_str(ref, "apiGroup", NULL);
        const char *k = json_find_str(ref, "kind", NULL);
        const char *n = json_find_str(ref, "name", NULL);

        return g && k && n && strcmp(g, CAPI_IPAM_GROUP) == 0 && strcmp(k, kind) == 0 &&
               strcmp(n, name) == 0;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

        (void)nanosleep(&ts, NULL);
}

/* --- conditions ------------------------------------------------------------------------------ */

/* One condition of type Ready in list (created when missing); lastTransitionTime changes only
 * with status. v1beta1 conditions carry a severity when not True and no reason when True. */
static void put_ready(cJSON *list, bool v1beta1, bool ok, const char *reason, const char *msg)
{
        const char *want = ok ? "True" : "False";
        cJSON *c = NULL, *x;
        char ts[RFC3339_LEN];

        cJSON_ArrayForEach (x, list) {
                const char *t = json_find_str(x, "type", NULL);

                if (t && strcmp(t, "Ready") == 0)
                        c = x;
        }
        if (!c) {
                c = cJSON_CreateObject();
                json_set_string(c, "type", "Ready");
                cJSON_AddItemToArray(list, c);
        }
        if (!json_find_str(c, "status", NULL) ||
            strcmp(json_find_str(c, "status", NULL), want) != 0) {
                rfc3339_format(time(NULL), ts);
                json_set_string(c, "lastTransitionTime", ts);
        }
        json_set_string(c, "status", want);
        cJSON_DeleteItemFromObjectCaseSensitive(c, "severity");
        cJSON_DeleteItemFromObjectCaseSensitive(c, "reason");
        cJSON_DeleteItemFromObjectCaseSensitive(c, "message");
        if (v1beta1 && !ok)
                json_set_string(c, "severity", "Error");
        if (!(v1beta1 && ok))
                json_set_string(c, "reason", reason);
        if (msg && *msg)
                json_set_string(c, "message", msg);
}

static cJSON *child_array(cJSON *obj, const char *key)
{
        cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);

        if (!cJSON_IsArray(a)) {
                a = cJSON_CreateArray();
                json_set_item(obj, key, a);
        }
        return a;
}

/* The claim's Ready in the contract's shapes: v1beta2 status.conditions; v1beta1
 * status.conditions (CAPI's v1beta1 conditions) and status.v1beta2.conditions. */
static void set_ready(struct cctx *c, bool ok, const char *reason, const char *msg)
{
        cJSON *st = json_child_object(c->after, "status", NULL);

        if (capi_contract.v1beta2) {
                put_ready(child_array(st, "conditions"), false, ok, reason, msg);
                return;
        }
        put_ready(child_array(st, "conditions"), true, ok, reason, msg);
        put_ready(child_array(json_child_object(st, "v1beta2", NULL), "conditions"), false, ok,
                  reason, msg);
}

static int write_claim(struct cctx *c)
{
        return capi_write(c->w, &CAPI_RES_IPCLAIMS, kube_object_json(c->claim), c->after);
}

/* --- the pool's addresses --------------------------------------------------------------------- */

struct used {
        const char *kind, *name;
        uint32_t *v;
        size_t n;
        size_t out_of_range; /* counted against set when set is non-NULL */
        const struct capi_ipset *set;
};

static void collect(void *arg, struct kube_object *obj)
{
        struct used *u = arg;
        const cJSON *spec = json_find(kube_object_json(obj), "spec", NULL);
        uint32_t ip = 0;

        if (!same_pool(json_find(spec, "poolRef", NULL), u->kind, u->name) ||
            !capi_ipv4_parse(json_find_str(spec, "address", NULL), &ip))
                return;
        u->v = xrealloc(u->v, (u->n + 1) * sizeof(*u->v));
        u->v[u->n++] = ip;
        if (u->set && !capi_ipset_has(u->set, ip))
                u->out_of_range++;
}

/* The addresses handed out from a pool: its namespace's IPAddresses, every namespace's for
 * a global pool. */
static void addresses_of(
        struct capi *s, const char *ns, const char *kind, const char *name, struct used *u)
{
        u->kind = kind;
        u->name = name;
        (void)informer_each(s->ipaddresses, ns && *ns ? ns : NULL, NULL, collect, u);
}

static struct kube_object *get_pool(struct capi *s, bool global, const char *ns, const char *name)
{
        return global ? informer_get(s->gpools, NULL, name) : informer_get(s->pools, ns, name);
}

/* --- release --------------------------------------------------------------------------------- */

static int release(struct cctx *c)
{
        struct kube_object *a = informer_get(c->w->s->ipaddresses, c->ns, c->name);
        int err = 0;

        if (a) {
                cJSON *after = cJSON_Duplicate(kube_object_json(a), true);

                capi_remove_finalizer(after, CAPI_FINALIZER_PROTECT_ADDRESS);
                err = capi_write(c->w, &CAPI_RES_IPADDRESSES, kube_object_json(a), after);
                if (err == CM_ENOTFOUND)
                        err = 0;
                if (err == 0)
                        err = capi_delete(c->w->kube, &CAPI_RES_IPADDRESSES, c->ns, c->name);
                if (err == 0)
                        log_info(LOGGER, "address released", "claim=%s/%s address=%s", c->ns,
                                 c->name,
                                 json_find_str(kube_object_json(a), "spec", "address", NULL));
                cJSON_Delete(after);
                kube_object_unref(a);
        }
        if (err == 0) {
                capi_remove_finalizer(c->after, CAPI_FINALIZER_RELEASE_ADDRESS);
                err = write_claim(c);
        }
        return err == CM_ENOTFOUND ? 0 : err;
}

/* --- allocation ------------------------------------------------------------------------------- */

static void add_ref(cJSON *refs,
                    const char *api_version,
                    const char *kind,
                    const char *name,
                    const char *uid,
                    bool controller)
{
        cJSON *r = cJSON_CreateObject();

        json_set_string(r, "apiVersion", api_version);
        json_set_string(r, "kind", kind);
        json_set_string(r, "name", name);
        json_set_string(r, "uid", uid);
        json_set_bool(r, "controller", controller);
        json_set_bool(r, "blockOwnerDeletion", true);
        cJSON_AddItemToArray(refs, r);
}

static cJSON *new_address(const struct cctx *c,
                          const struct kube_object *pool,
                          const struct capi_pool *p,
                          uint32_t ip)
{
        cJSON *a = cJSON_CreateObject();
        cJSON *meta = json_child_object(a, "metadata", NULL);
        cJSON *spec = json_child_object(a, "spec", NULL);
        cJSON *pref = json_child_object(spec, "poolRef", NULL);
        cJSON *refs = cJSON_CreateArray(), *fin = cJSON_CreateArray();
        const char *cluster = json_find_str(kube_object_json(c->claim), "metadata", "labels",
                                            SCHEMA_LABEL_CLUSTER_NAME, NULL);
        char text[CAPI_IPV4_LEN], api_version[64];

        (void)snprintf(api_version, sizeof(api_version), CAPI_IPAM_GROUP "/%s",
                       CAPI_RES_IPADDRESSES.version);
        json_set_string(a, "apiVersion", api_version);
        json_set_string(a, "kind", "IPAddress");
        json_set_string(meta, "name", c->name);
        json_set_string(meta, "namespace", c->ns);
        if (cluster)
                capi_set_label(a, SCHEMA_LABEL_CLUSTER_NAME, cluster);
        add_ref(refs, json_find_str(kube_object_json(c->claim), "apiVersion", NULL),
                "IPAddressClaim", c->name, kube_object_uid(c->claim), true);
        add_ref(refs, CAPI_IPAM_GROUP "/v1alpha2", c->pool_kind, c->pool_name,
                kube_object_uid(pool), false);
        json_set_item(meta, "ownerReferences", refs);
        cJSON_AddItemToArray(fin, cJSON_CreateString(CAPI_FINALIZER_PROTECT_ADDRESS));
        json_set_item(meta, "finalizers", fin);
        json_set_string(json_child_object(spec, "claimRef", NULL), "name", c->name);
        json_set_string(pref, "apiGroup", CAPI_IPAM_GROUP);
        json_set_string(pref, "kind", c->pool_kind);
        json_set_string(pref, "name", c->pool_name);
        capi_ipv4_format(ip, text);
        json_set_string(spec, "address", text);
        json_set_int64(spec, "prefix", p->prefix);
        if (p->has_gateway) {
                capi_ipv4_format(p->gateway, text);
                json_set_string(spec, "gateway", text);
        }
        return a;
}

/* Until the informer holds ns/name (bounded): the next claim must see it in use. */
static bool wait_cached(struct capi *s, const char *ns, const char *name)
{
        for (unsigned t = 0; t <= CACHE_WAIT_MS; t += CACHE_POLL_MS) {
                struct kube_object *o = informer_get(s->ipaddresses, ns, name);

                if (o) {
                        kube_object_unref(o);
                        return true;
                }
                sleep_ms(CACHE_POLL_MS);
        }
        return false;
}

/* Creates the claim's IPAddress from pool; *ret_ok false (and Ready False written) when the
 * pool cannot answer. */
static int allocate(struct cctx *c, const struct kube_object *pool, bool *ret_ok)
{
        struct capi_pool p = { 0 };
        struct used u = { 0 };
        char why[REASON_MAX], text[CAPI_IPV4_LEN];
        uint32_t ip = 0;
        cJSON *a;
        int err;

        *ret_ok = false;
        if (capi_pool_parse(json_find(kube_object_json(pool), "spec", NULL), &p, why,
                            sizeof(why)) != 0) {
                char msg[REASON_MAX + 128];

                (void)snprintf(msg, sizeof(msg), "%s %s: %s", c->pool_kind, c->pool_name, why);
                set_ready(c, false, "AllocationFailed", msg);
                return write_claim(c);
        }
        addresses_of(c->w->s, c->global ? NULL : c->ns, c->pool_kind, c->pool_name, &u);
        if (!capi_pool_first_free(&p, u.v, u.n, &ip)) {
                char msg[256];

                (void)snprintf(msg, sizeof(msg), "%s %s has no free address (%zu in use)",
                               c->pool_kind, c->pool_name, u.n);
                set_ready(c, false, "PoolExhausted", msg);
                err = write_claim(c);
                goto out;
        }
        a = new_address(c, pool, &p, ip);
        err = capi_create(c->w->kube, &CAPI_RES_IPADDRESSES, c->ns, a, NULL);
        cJSON_Delete(a);
        if (err == 0 && !wait_cached(c->w->s, c->ns, c->name))
                err = CM_ETIMEDOUT;
        if (err == 0) {
                capi_ipv4_format(ip, text);
                log_info(LOGGER, "address allocated", "claim=%s/%s pool=%s/%s address=%s/%u", c->ns,
                         c->name, c->pool_kind, c->pool_name, text, p.prefix);
                *ret_ok = true;
        }
out:
        free(u.v);
        capi_ipset_release(&p.set);
        return err;
}

/* --- the claim pass --------------------------------------------------------------------------- */

/* Step 2: the claim's Cluster is paused, or (not deleting) missing. */
static bool cluster_holds(struct cctx *c)
{
        const cJSON *o = kube_object_json(c->claim);
        const char *name = json_find_str(o, "spec", "clusterName", NULL);
        struct kube_object *cl;
        bool hold;

        if (!name || !*name)
                name = json_find_str(o, "metadata", "labels", SCHEMA_LABEL_CLUSTER_NAME, NULL);
        if (!name || !*name)
                return false;
        cl = informer_get(c->w->s->clusters, c->ns, name);
        hold = cl ? capi_paused(kube_object_json(cl)) : !capi_deleting(o);
        kube_object_unref(cl);
        return hold;
}

static int claim_pass(struct cctx *c, struct reconcile_result *res)
{
        struct kube_object *pool, *have;
        bool deleting = capi_deleting(kube_object_json(c->claim)), ok = false;
        char msg[REASON_MAX];
        int err = 0;

        if (cluster_holds(c))
                return 0;
        if (!deleting && !capi_has_finalizer(c->after, CAPI_FINALIZER_RELEASE_ADDRESS)) {
                capi_add_finalizer(c->after, CAPI_FINALIZER_RELEASE_ADDRESS);
                return write_claim(c); /* its update brings the next pass */
        }
        pool = get_pool(c->w->s, c->global, c->ns, c->pool_name);
        if (deleting) {
                err = capi_has_finalizer(c->after, CAPI_FINALIZER_RELEASE_ADDRESS) ? release(c) : 0;
                kube_object_unref(pool);
                return err;
        }
        if (!pool) { /* the pool's creation enqueues the claim again */
                (void)snprintf(msg, sizeof(msg), "%s %s not found", c->pool_kind, c->pool_name);
                set_ready(c, false, "PoolNotReady", msg);
                return write_claim(c);
        }
        if (json_find(kube_object_json(pool), "metadata", "annotations", "cluster.x-k8s.io/paused",
                      NULL)) {
                kube_object_unref(pool);
                return 0;
        }
        have = informer_get(c->w->s->ipaddresses, c->ns, c->name);
        if (!have)
                err = allocate(c, pool, &ok);
        if (err == 0 && (have || ok)) {
                json_set_string(json_child_object(json_child_object(c->after, "status", NULL),
                                                  "addressRef", NULL),
                                "name", c->name);
                set_ready(c, true, "Ready", NULL);
                err = write_claim(c);
        }
        if (err == CM_ETIMEDOUT)
                *res = (struct reconcile_result){ RECONCILE_REQUEUE_AFTER, CLAIM_RETRY_MS };
        kube_object_unref(have);
        kube_object_unref(pool);
        return err == CM_ETIMEDOUT ? 0 : err;
}

int capi_ipclaim_reconcile(struct capi_worker *w,
                           const char *ns,
                           const char *name,
                           struct reconcile_result *res)
{
        struct cctx c = { .w = w, .ns = ns, .name = name };
        const cJSON *ref;
        int err;

        c.claim = informer_get(w->s->ipclaims, ns, name);
        if (!c.claim)
                return 0;
        ref = json_find(kube_object_json(c.claim), "spec", "poolRef", NULL);
        if (!serves(ref, &c.global)) { /* another IPAM provider's claim */
                kube_object_unref(c.claim);
                return 0;
        }
        c.pool_kind = json_find_str(ref, "kind", NULL);
        c.pool_name = json_find_str(ref, "name", NULL);
        c.after = cJSON_Duplicate(kube_object_json(c.claim), true);
        err = c.pool_name ? claim_pass(&c, res) : 0;
        cJSON_Delete(c.after);
        kube_object_unref(c.claim);
        return err == CM_ENOTFOUND ? 0 : err;
}

/* --- pools ----------------------------------------------------------------------------------- */

static void set_counts(cJSON *after, uint64_t total, size_t used, size_t out_of_range)
{
        cJSON *c = json_child_object(json_child_object(after, "status", NULL), "ipAddresses", NULL);

        json_set_int64(c, "total", (int64_t)total);
        json_set_int64(c, "used", (int64_t)used);
        json_set_int64(c, "free", (int64_t)total - (int64_t)used);
        json_set_int64(c, "outOfRange", (int64_t)out_of_range);
}

int capi_pool_reconcile(struct capi_worker *w,
                        const char *ns,
                        const char *name,
                        struct reconcile_result *res)
{
        bool global = !ns || !*ns;
        const struct kube_resource *r = global ? &CAPI_RES_GLOBAL_POOLS : &CAPI_RES_POOLS;
        struct kube_object *pool = get_pool(w->s, global, ns, name);
        struct capi_pool p = { 0 };
        struct used u = { 0 };
        char why[REASON_MAX];
        cJSON *after;
        int err;

        (void)res;
        if (!pool)
                return 0;
        after = cJSON_Duplicate(kube_object_json(pool), true);
        if (capi_pool_parse(json_find(after, "spec", NULL), &p, why, sizeof(why)) == 0)
                u.set = &p.set;
        addresses_of(w->s, global ? NULL : ns, r->kind, name, &u);
        if (capi_deleting(after)) {
                if (u.n == 0)
                        capi_remove_finalizer(after, CAPI_FINALIZER_PROTECT_POOL);
        } else {
                capi_add_finalizer(after, CAPI_FINALIZER_PROTECT_POOL);
                if (u.set)
                        set_counts(after, capi_ipset_count(&p.set), u.n, u.out_of_range);
        }
        err = capi_write(w, r, kube_object_json(pool), after);
        free(u.v);
        capi_ipset_release(&p.set);
        cJSON_Delete(after);
        kube_object_unref(pool);
        return err == CM_ENOTFOUND ? 0 : err;
}

/* --- watch mappings ------------------------------------------------------------------------- */

void capi_map_address_to_claim(void *arg,
                               const struct kube_object *obj,
                               void (*add)(void *ctl, const char *ns, const char *name),
                               void *ctl)
{
        const char *claim = json_find_str(kube_object_json(obj), "spec", "claimRef", "name", NULL);

        (void)arg;
        if (claim)
                add(ctl, kube_object_namespace(obj), claim);
}

void capi_map_address_to_pool(void *arg,
                              const struct kube_object *obj,
                              void (*add)(void *ctl, const char *ns, const char *name),
                              void *ctl)
{
        const cJSON *ref = json_find(kube_object_json(obj), "spec", "poolRef", NULL);
        const char *name = json_find_str(ref, "name", NULL);
        bool global = false;

        (void)arg;
        if (name && serves(ref, &global))
                add(ctl, global ? "" : kube_object_namespace(obj), name);
}

void capi_map_pool_to_claims(void *arg,
                             const struct kube_object *obj,
                             void (*add)(void *ctl, const char *ns, const char *name),
                             void *ctl)
{
        const char *ns = kube_object_namespace(obj);

        (void)informer_each_key(arg, ns && *ns ? ns : NULL, NULL, add, ctl);
}

void capi_map_cluster_to_claims(void *arg,
                                const struct kube_object *obj,
                                void (*add)(void *ctl, const char *ns, const char *name),
                                void *ctl)
{
        (void)informer_each_key(arg, kube_object_namespace(obj), kube_object_name(obj), add, ctl);
}
