/*
 * maasmachine_ipam: Cluster API's IPAM contract for a MaasMachine with spec.addressesFromPools
 * (docs/static-ips.md, "IPAM"). The first pool named is used:
 *
 *   - one IPAddressClaim per MaasMachine, <maasmachine>-0 (the pool's index), found by its
 *     controller ownerReference (the MaasMachine's UID) in the informer cache before one is
 *     created, so a restart never makes a second; labelled with the cluster name (and the
 *     watch filter, so our informer sees it), spec.clusterName set;
 *   - created before the machine is allocated, so a missing pool shows at once; until the
 *     IPAM provider answers (status.addressRef) the machine waits: IPAddressClaimed False
 *     WaitingForIPAddress naming the claim and pool, a requeue, no MAAS call; a claim its
 *     provider marks Ready False is IPAddressClaimFailed with the provider's words;
 *   - the answer (the IPAddress: address, prefix, gateway) becomes the struct
 *     schema_static_ip the MAAS network step applies (cidr: the network of address/prefix);
 *   - deleted by maasmachine_delete.c only after the MAAS machine was released, so the
 *     address goes back to its pool once MAAS no longer holds it.
 *
 * Reads: the claims informer (p->ipclaims); one GET of the IPAddress when the address is
 * needed (before the first allocation, and in a pass that deploys). Writes: create and
 * delete of the claim.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cidr.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

#define LOGGER         MAASMACHINE_LOGGER
#define WAIT_MS        2000  /* a claim not answered yet is looked at again (its watch also) */
#define FAILED_MS      30000 /* a refused claim or an unusable answer */
#define CLAIM_NAME_MAX 253
/* A claim this process created is waited for in the cache this long before another create
 * is tried (the MaasMachine's own status write brings a pass before the claim's watch event). */
#define CREATED_KEEP_S 60

static const struct schema_pool_ref *first_pool(const struct maasmachine_ctx *c)
{
        const struct schema_pool_refs *r = &c->mm.spec.addresses_from_pools;

        return r->n > 0 ? &r->items[0] : NULL;
}

/* The first pool's kind and name for messages ("" without one: never NULL). */
static const char *pool_kind(const struct maasmachine_ctx *c)
{
        const struct schema_pool_ref *p = first_pool(c);

        return p && p->kind ? p->kind : "";
}

static const char *pool_name(const struct maasmachine_ctx *c)
{
        const struct schema_pool_ref *p = first_pool(c);

        return p && p->name ? p->name : "";
}

static const char *cluster_name(const struct maasmachine_ctx *c)
{
        return c->cluster ? kube_object_name(c->cluster) : NULL;
}

static bool deleting(const cJSON *o)
{
        return json_find_str(o, "metadata", "deletionTimestamp", NULL) != NULL;
}

static const char *or_empty(const char *s)
{
        return s ? s : "";
}

/* The claim's controller ownerReference names this MaasMachine (by UID). */
static bool owned_by(const cJSON *claim, const char *uid)
{
        const cJSON *ref;

        cJSON_ArrayForEach (ref, json_find(claim, "metadata", "ownerReferences", NULL)) {
                const char *u = json_find_str(ref, "uid", NULL);

                if (cJSON_IsTrue(json_find(ref, "controller", NULL)) && u && uid &&
                    strcmp(u, uid) == 0)
                        return true;
        }
        return false;
}

struct find {
        const char *uid;
        struct kube_object *found;
};

static void match_owner(void *arg, struct kube_object *obj)
{
        struct find *f = arg;

        if (!f->found && owned_by(kube_object_json(obj), f->uid))
                f->found = kube_object_ref(obj);
}

/* The cached claim this MaasMachine controls, or NULL (a new reference). The claims carry
 * the cluster-name label, so only that cluster's claims are parsed. */
static struct kube_object *find_claim(const struct maasmachine_ctx *c)
{
        struct find f = { .uid = c->mm.meta.uid };

        if (c->p->ipclaims && f.uid)
                (void)informer_each(c->p->ipclaims, c->ns, cluster_name(c), match_owner, &f);
        return f.found;
}

static cJSON *new_claim(const struct maasmachine_ctx *c,
                        const struct schema_pool_ref *pool,
                        const char *name)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *meta = json_child_object(o, "metadata", NULL);
        cJSON *labels = json_child_object(meta, "labels", NULL);
        cJSON *refs = cJSON_CreateArray(), *ref = cJSON_CreateObject();
        cJSON *spec = json_child_object(o, "spec", NULL);
        cJSON *pref = json_child_object(spec, "poolRef", NULL);
        const char *filter = schema_strmap_get(&c->mm.meta.labels, SCHEMA_LABEL_WATCH_FILTER);
        char api_version[64];

        (void)snprintf(api_version, sizeof(api_version), "%s/%s", CAPI_IPAM_GROUP,
                       c->p->ipam.version);
        json_set_string(o, "apiVersion", api_version);
        json_set_string(o, "kind", c->p->ipam.claims.kind);
        json_set_string(meta, "name", name);
        json_set_string(meta, "namespace", c->ns);
        json_set_string(labels, SCHEMA_LABEL_CLUSTER_NAME, cluster_name(c));
        if (filter)
                json_set_string(labels, SCHEMA_LABEL_WATCH_FILTER, filter);
        json_set_string(ref, "apiVersion", SCHEMA_API_VERSION);
        json_set_string(ref, "kind", SCHEMA_KIND_MACHINE);
        json_set_string(ref, "name", c->name);
        json_set_string(ref, "uid", c->mm.meta.uid);
        json_set_bool(ref, "controller", true);
        json_set_bool(ref, "blockOwnerDeletion", true);
        cJSON_AddItemToArray(refs, ref);
        json_set_item(meta, "ownerReferences", refs);
        json_set_string(spec, "clusterName", cluster_name(c));
        json_set_string(pref, "apiGroup", pool->api_group ? pool->api_group : "");
        json_set_string(pref, "kind", pool->kind ? pool->kind : "");
        json_set_string(pref, "name", pool->name ? pool->name : "");
        return o;
}

static void set_cond(struct maasmachine_ctx *c,
                     const char *status,
                     const char *reason,
                     const char *msg)
{
        reconciler_cond(&c->conds, SCHEMA_COND_IPADDRESS_CLAIMED, status, reason, "%s", msg);
}

static void failed(struct maasmachine_ctx *c, struct reconcile_result *res, const char *msg)
{
        set_cond(c, SCHEMA_CONDITION_FALSE, SCHEMA_REASON_IPADDRESS_CLAIM_FAILED, msg);
        maasmachine_requeue(res, FAILED_MS);
}

static void waiting(struct maasmachine_ctx *c, struct reconcile_result *res, const char *claim)
{
        char *msg = xasprintf("IPAddressClaim %s from %s %s not answered yet", claim, pool_kind(c),
                              pool_name(c));

        set_cond(c, SCHEMA_CONDITION_FALSE, SCHEMA_REASON_WAITING_FOR_IP_ADDRESS, msg);
        maasmachine_requeue(res, WAIT_MS);
        free(msg);
}

/* Whether this process created the claim in the last CREATED_KEEP_S (forgets it when not). */
static bool created_here(struct maasmachine_ctx *c, bool forget)
{
        struct provider *p = c->p;
        struct reconciler_entry *e;
        bool yes;

        pthread_mutex_lock(&p->lock);
        e = reconciler_table_get(&p->claimed, c->mm.meta.uid);
        yes = e && c->now - e->a < CREATED_KEEP_S;
        if (e && (forget || !yes))
                reconciler_table_del(&p->claimed, c->mm.meta.uid);
        pthread_mutex_unlock(&p->lock);
        return yes;
}

static void note_created(struct maasmachine_ctx *c)
{
        pthread_mutex_lock(&c->p->lock);
        reconciler_table_put(&c->p->claimed, c->mm.meta.uid)->a = c->now;
        pthread_mutex_unlock(&c->p->lock);
}

/* Creates <maasmachine>-0. Another object of that name (a claim left by an earlier
 * MaasMachine of the same name, still being released) fails the step until it is gone. */
static int create_claim(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        char *name = xasprintf("%s-0", c->name);
        cJSON *o = NULL;
        struct kube_error e = { 0 };
        struct kube_object *other;
        int err = 0;

        if (strlen(name) > CLAIM_NAME_MAX) {
                char *msg = xasprintf("IPAddressClaim name %s is longer than %d characters", name,
                                      CLAIM_NAME_MAX);

                failed(c, res, msg);
                free(msg);
                goto out;
        }
        if (created_here(c, false)) { /* not in the cache yet */
                waiting(c, res, name);
                goto out;
        }
        o = new_claim(c, first_pool(c), name);
        err = kube_create(c->w->kube, &c->p->ipam.claims, c->ns, o, NULL, &e);
        if (err == 0) {
                note_created(c);
                log_info(LOGGER, "IPAddressClaim created", "object=%s/%s claim=%s pool=%s/%s",
                         c->ns, c->name, name, pool_kind(c), pool_name(c));
                waiting(c, res, name);
        } else if (err == CM_EEXIST) {
                other = informer_get(c->p->ipclaims, c->ns, name);
                if (other && !owned_by(kube_object_json(other), c->mm.meta.uid)) {
                        char *msg = xasprintf("IPAddressClaim %s exists and is not this "
                                              "MaasMachine's (waiting for it to go)",
                                              name);

                        failed(c, res, msg);
                        free(msg);
                } else { /* ours, not cached yet */
                        waiting(c, res, name);
                }
                kube_object_unref(other);
                err = 0;
        } else if (err == CM_EINVAL || err == CM_EFORBIDDEN) { /* 422 or RBAC: say so */
                char *msg = xasprintf("cannot create IPAddressClaim %s: %s", name,
                                      e.message ? e.message : cm_strerror(err));

                failed(c, res, msg);
                free(msg);
                err = 0;
        }
out:
        kube_error_release(&e);
        cJSON_Delete(o);
        free(name);
        return err;
}

/* The claim's Ready condition is False: the IPAM provider refused it (its words). */
static const cJSON *refused(const cJSON *claim)
{
        const cJSON *k;

        cJSON_ArrayForEach (k, json_find(claim, "status", "conditions", NULL)) {
                const char *t = json_find_str(k, "type", NULL);
                const char *s = json_find_str(k, "status", NULL);

                if (t && s && strcmp(t, "Ready") == 0 && strcmp(s, "False") == 0)
                        return k;
        }
        return NULL;
}

/* The IPAddress spec as a static address; a message in *ret_why when it is not usable. */
static struct schema_static_ip *from_address(const cJSON *addr, char **ret_why)
{
        const char *ip = json_find_str(addr, "spec", "address", NULL);
        const char *gw = json_find_str(addr, "spec", "gateway", NULL);
        const cJSON *prefix = json_find(addr, "spec", "prefix", NULL);
        struct cidr net = { 0 };
        struct ip_addr g;
        char text[CIDR_TEXT_MAX];
        struct schema_static_ip *s;
        int64_t n = -1;

        if (!ip || ip_addr_parse(ip, &net.addr) != 0) {
                *ret_why = xasprintf("spec.address %s is not an IP address", ip ? ip : "(none)");
                return NULL;
        }
        if (!prefix || json_number_to_int64(prefix, &n) != 0 || n < 0 ||
            n > (net.addr.family == AF_INET ? 32 : 128)) {
                *ret_why = xasprintf("spec.prefix is not a prefix length for %s", ip);
                return NULL;
        }
        if (gw && *gw && ip_addr_parse(gw, &g) != 0) {
                *ret_why = xasprintf("spec.gateway %s is not an IP address", gw);
                return NULL;
        }
        net.prefix = (unsigned)n;
        net = cidr_network(&net);
        s = xcalloc(1, sizeof(*s));
        s->ip = xstrdup(ip);
        s->cidr = xstrdup(cidr_format(&net, text, sizeof(text)));
        s->gateway = gw && *gw ? xstrdup(gw) : NULL;
        return s;
}

/* GETs the IPAddress the claim names into c->claimed_ip; *ret_why (malloc'd) when the
 * answer is unusable, CM_ENOTFOUND when it is not there (yet). */
static int read_address(struct maasmachine_ctx *c, const cJSON *claim, char **ret_why)
{
        const char *name = json_find_str(claim, "status", "addressRef", "name", NULL);
        cJSON *addr = NULL;
        char *why = NULL;
        int err;

        *ret_why = NULL;
        err = kube_get(c->w->kube, &c->p->ipam.addresses, c->ns, name, &addr, NULL);
        if (err)
                return err;
        maasmachine_set_claimed_ip(c, from_address(addr, &why));
        if (!c->claimed_ip)
                *ret_why = xasprintf("IPAddress %s: %s", name, why);
        free(why);
        cJSON_Delete(addr);
        return 0;
}

/* The claim answered: read the address when this pass needs it, and say so. */
static int answered(struct maasmachine_ctx *c,
                    const cJSON *claim,
                    bool need_address,
                    struct reconcile_result *res,
                    bool *ret_ready)
{
        const struct schema_condition *was =
                schema_conditions_find(&c->mm.status.conditions, SCHEMA_COND_IPADDRESS_CLAIMED);
        const char *claim_name = json_find_str(claim, "metadata", "name", NULL);
        char *why = NULL, *msg;
        int err;

        if (!need_address && was && strcmp(was->status, SCHEMA_CONDITION_TRUE) == 0) {
                *ret_ready = true;
                return 0;
        }
        err = read_address(c, claim, &why);
        if (err == CM_ENOTFOUND) { /* answered in the cache, the address not there yet */
                waiting(c, res, claim_name);
                return 0;
        }
        if (err)
                return err;
        if (why) {
                failed(c, res, why);
                free(why);
                return 0;
        }
        msg = xasprintf("%s (%s) from %s %s, IPAddressClaim %s", c->claimed_ip->ip,
                        c->claimed_ip->cidr, pool_kind(c), pool_name(c), claim_name);
        if (!was || strcmp(was->status, SCHEMA_CONDITION_TRUE) != 0)
                reconciler_event(c->p, c->cur, "Normal", "IPAddressClaimed", "%s", msg);
        set_cond(c, SCHEMA_CONDITION_TRUE, SCHEMA_REASON_IPADDRESS_CLAIMED, msg);
        free(msg);
        *ret_ready = true;
        return 0;
}

int maasmachine_ipam_claim(struct maasmachine_ctx *c,
                           bool need_address,
                           struct reconcile_result *res,
                           bool *ret_ready)
{
        struct kube_object *claim;
        const cJSON *o, *no;
        char *msg;
        int err = 0;

        *ret_ready = false;
        if (!first_pool(c))
                return 0;
        if (!c->p->ipclaims) {
                failed(c, res,
                       c->p->ipam_forbidden
                               ? "capmaas may not list " CAPI_IPAM_GROUP " ipaddressclaims: "
                                 "apply this release's RBAC (addressesFromPools cannot be "
                                 "used until then)"
                               : "the management cluster does not serve " CAPI_IPAM_GROUP
                                 " (Cluster API's IPAM CRDs): addressesFromPools cannot be used");
                return 0;
        }
        claim = find_claim(c);
        if (!claim)
                return create_claim(c, res);
        (void)created_here(c, true); /* cached: the note is no longer needed */
        o = kube_object_json(claim);
        no = refused(o);
        if (deleting(o)) {
                msg = xasprintf("IPAddressClaim %s is being deleted",
                                json_find_str(o, "metadata", "name", NULL));
                failed(c, res, msg);
                free(msg);
        } else if (no) {
                msg = xasprintf("IPAddressClaim %s: %s: %s",
                                json_find_str(o, "metadata", "name", NULL),
                                or_empty(json_find_str(no, "reason", NULL)),
                                or_empty(json_find_str(no, "message", NULL)));
                failed(c, res, msg);
                free(msg);
        } else if (!json_find_str(o, "status", "addressRef", "name", NULL) ||
                   !*json_find_str(o, "status", "addressRef", "name", NULL)) {
                waiting(c, res, json_find_str(o, "metadata", "name", NULL));
        } else {
                err = answered(c, o, need_address, res, ret_ready);
        }
        kube_object_unref(claim);
        return err;
}

int maasmachine_static_ip(struct maasmachine_ctx *c, const struct schema_static_ip **ret)
{
        struct kube_object *claim;
        bool ready = false;
        struct reconcile_result res = { 0 };
        int err;

        *ret = c->mm.spec.static_ip;
        if (*ret || !first_pool(c))
                return 0;
        if (!c->claimed_ip) {
                claim = c->p->ipclaims ? find_claim(c) : NULL;
                err = claim ? answered(c, kube_object_json(claim), true, &res, &ready) : 0;
                kube_object_unref(claim);
                if (err)
                        return err;
                if (!c->claimed_ip) /* the claim went or is no longer answered */
                        return CM_ENOTFOUND;
        }
        *ret = c->claimed_ip;
        return 0;
}

struct doomed {
        const char *uid;
        struct kube_object *items[4];
        size_t n;
};

static void collect_owned(void *arg, struct kube_object *obj)
{
        struct doomed *d = arg;

        if (d->n < sizeof(d->items) / sizeof(d->items[0]) &&
            owned_by(kube_object_json(obj), d->uid) && !deleting(kube_object_json(obj)))
                d->items[d->n++] = kube_object_ref(obj);
}

int maasmachine_ipam_release(struct maasmachine_ctx *c)
{
        struct doomed d = { .uid = c->mm.meta.uid };
        int err = 0;

        if (!c->p->ipclaims || !d.uid)
                return 0;
        (void)created_here(c, true);
        /* the MaasMachine's cluster's claims (its Cluster may be gone by now) */
        (void)informer_each(c->p->ipclaims, c->ns,
                            schema_strmap_get(&c->mm.meta.labels, SCHEMA_LABEL_CLUSTER_NAME),
                            collect_owned, &d);
        for (size_t i = 0; i < d.n; i++) {
                const char *name = kube_object_name(d.items[i]);
                int e = kube_delete(c->w->kube, &c->p->ipam.claims, c->ns, name,
                                    &(struct kube_delete_opts){
                                            .grace_period_seconds = -1,
                                            .precondition_uid = kube_object_uid(d.items[i]) },
                                    NULL);

                if (e == 0)
                        log_info(LOGGER, "IPAddressClaim deleted", "object=%s/%s claim=%s", c->ns,
                                 c->name, name);
                if (e && e != CM_ENOTFOUND && err == 0)
                        err = e;
                kube_object_unref(d.items[i]);
        }
        return err;
}
