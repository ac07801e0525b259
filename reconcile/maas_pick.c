/*
 * maas_pick: which MAAS a pass uses (see reconciler.h, reconciler_maas_pick). Its own file:
 * it calls the identity pool, the worker and the shared condition and event helpers, none of
 * which calls it back.
 */
#include <stdlib.h>

#include "err.h"
#include "json.h"
#include "log.h"
#include "maas_identity.h"
#include "maas_inventory.h"
#include "reconciler.h"
#include "worker.h"
#include "xalloc.h"

bool reconciler_maas_pick(struct reconciler_worker *w,
                          const char *ns,
                          const char *cluster,
                          const char *secret,
                          const struct reconciler_conditions *conds,
                          const cJSON *obj,
                          struct reconcile_result *res)
{
        char *named = secret ? NULL : maas_ident_of_cluster(w->p->idents, ns, cluster);
        struct maas_ident_failure f = { 0 };
        struct maas_ident *id = NULL;
        bool own = secret != NULL; /* the MaasCluster's pass: its spec names the Secret */
        int err;

        if (!secret)
                secret = named;
        if (!secret)
                return true; /* the process-wide MAAS */
        err = maas_ident_acquire(w->p->idents, w->kube, ns, secret, &id, &f);
        if (err == 0) {
                err = reconciler_worker_use_ident(w, id); /* takes the reference */
                if (err) {
                        f.reason = "IdentityUnavailable";
                        f.message = xasprintf("no MAAS client for Secret %s/%s: %s", ns, secret,
                                              cm_strerror(err));
                        f.retry_ms = 1000;
                }
        }
        if (err == 0) {
                reconciler_cond(conds, RECONCILER_COND_MAAS_AVAILABLE, "True", "MAASAvailable",
                                NULL);
                free(named);
                return true;
        }
        reconciler_cond(conds, RECONCILER_COND_MAAS_AVAILABLE, "False", f.reason, "%s", f.message);
        reconciler_event(w->p, obj, "Warning", f.reason, "%s", f.message);
        log_info("reconciler", "MAAS identity unusable", "object=%s/%s reason=%s retry_ms=%llu", ns,
                 json_find_str(obj, "metadata", "name", NULL), f.reason,
                 (unsigned long long)f.retry_ms);
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = f.retry_ms;
        /* the MaasCluster comes back often enough to see a fixed Secret soon (a read every
         * MAAS_IDENT_POLL_MS at most, never a MAAS call); the pool then wakes the rest */
        if (own && res->after_ms > MAAS_IDENT_POLL_MS)
                res->after_ms = MAAS_IDENT_POLL_MS;
        maas_ident_failure_release(&f);
        free(named);
        return false;
}

struct maas_inventory_snapshot *reconciler_ident_inventory(struct provider *p,
                                                           const char *ns,
                                                           const char *secret)
{
        const struct provider_inventory_source *src = p->ident_inventories;
        struct maas_inventory_snapshot *s = NULL;
        struct maas_inventory *inv = NULL;
        enum maas_inv_state st = MAAS_INV_NOT_LOADED;
        char *why = NULL;
        int err;

        if (!src || !src->acquire || !secret)
                return NULL;
        err = src->acquire(src->ud, ns, secret, &inv, &why);
        if (err) {
                log_debug("reconciler", "no inventory of the cluster's MAAS",
                          "identity=%s/%s why=%s", ns, secret, why ? why : cm_strerror(err));
                free(why);
                return NULL;
        }
        s = maas_inventory_acquire(inv, &st, NULL);
        src->release(src->ud, inv);
        if (s && st != MAAS_INV_OK) { /* a guess is worse: what was written stays */
                maas_inventory_snapshot_release(s);
                s = NULL;
        }
        return s;
}
