/*
 * maas_pick: which MAAS a pass uses (see reconciler.h, reconciler_maas_pick). Its own file:
 * it calls the identity pool, the worker and the shared condition and event helpers, none of
 * which calls it back.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"
#include "log.h"
#include "maas_identity.h"
#include "maas_inventory.h"
#include "reconciler.h"
#include "worker.h"
#include "xalloc.h"

/* What a deleting object cannot do without the identity's credentials, added to the
 * failure's message (a new string), or NULL when obj is not deleting or the failure is not
 * one of the Secret (a MAAS refusing or not answering is said as it is). */
static char *deleting_message(const cJSON *obj, const struct maas_ident_failure *f)
{
        const char *kind = json_find_str(obj, "kind", NULL);
        const char *sid = json_find_str(obj, "spec", "systemID", NULL);
        const char *fix;

        if (!json_find_str(obj, "metadata", "deletionTimestamp", NULL) || !kind || !f->reason)
                return NULL;
        if (strcmp(f->reason, "IdentitySecretNotFound") == 0)
                fix = "recreate the Secret";
        else if (strcmp(f->reason, "IdentityInvalid") == 0)
                fix = "fix the Secret";
        else
                return NULL;
        if (strcmp(kind, "MaasMachine") == 0 && sid && *sid)
                return xasprintf("%s; without its credentials this MaasMachine cannot release "
                                 "its MAAS machine %s, and its finalizer stays: %s to let the "
                                 "release and the deletion finish (docs/credentials.md)",
                                 f->message, sid, fix);
        if (strcmp(kind, "MaasMachine") == 0)
                return xasprintf("%s; without its credentials this MaasMachine cannot look for "
                                 "a MAAS machine held for it and release it, and its finalizer "
                                 "stays: %s to let the deletion finish (docs/credentials.md)",
                                 f->message, fix);
        if (strcmp(kind, "MaasCluster") == 0)
                return xasprintf("%s; without its credentials the cluster's MaasMachines cannot "
                                 "release their MAAS machines nor this MaasCluster delete its "
                                 "DNS record or VIP reservation, and their finalizers stay: %s "
                                 "to let the deletion finish (docs/credentials.md)",
                                 f->message, fix);
        return NULL;
}

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
        char *deleting;
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
        deleting = deleting_message(obj, &f);
        if (deleting) {
                free(f.message);
                f.message = deleting;
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
