/*
 * maasmachine_storage: spec.storageLayout (docs/deploy-options.md). MAAS changes a machine's
 * storage layout only while it is Ready (set_storage_layout answers 409 "Cannot change the
 * storage layout on a machine that is not Ready." on an Allocated one), so the layout goes on
 * before the allocation: a dry-run allocate with every constraint names the machine MAAS
 * would hand out, set_storage_layout applies the layout to it, and the allocate that follows
 * asks for that machine by system_id.
 *
 * Crash safety: a machine stamped for the MaasMachine (allocated) got its layout first, so
 * adopting it after a restart needs nothing more; a process that dies between the layout and
 * the allocate leaves a Ready machine carrying the layout, and the next pass picks again and
 * applies the layout again (it replaces the storage configuration as a whole: idempotent).
 * Another client taking the picked machine in between makes the pinned allocate find
 * nothing: the pass is retried a second later.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "maasmachine_context.h"
#include "maasmachine_steps.h"
#include "xalloc.h"

static struct maas_storage_layout layout_opts(const struct schema_storage_layout *l)
{
        return (struct maas_storage_layout){
                .layout = l->type,
                .boot_size = l->boot_size,
                .root_size = l->root_size,
                .vg_name = l->vg_name,
                .lv_name = l->lv_name,
                .lv_size = l->lv_size,
                .cache_mode = l->cache_mode,
                .cache_size = l->cache_size,
                .cache_no_part = l->has_cache_no_part && l->cache_no_part,
        };
}

/* MAAS refused the layout: a condition with its text, retried in a minute (nothing of the
 * machine is ours yet). */
static void refused(struct maasmachine_ctx *c,
                    const char *sid,
                    int err,
                    const struct maas_error *me,
                    struct reconcile_result *res)
{
        const char *why = me->message ? me->message : maas_strerror(err);

        reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                        SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                        "storage layout %s on MAAS machine %s refused: %s",
                        c->mm.spec.storage_layout->type, sid, why);
        reconciler_event(c->p, c->cur, "Warning", "StorageLayoutFailed",
                         "storage layout %s on MAAS machine %s refused: %s",
                         c->mm.spec.storage_layout->type, sid, why);
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = 60000;
}

int maasmachine_storage_layout(struct maasmachine_ctx *c,
                               const struct maas_allocate_opts *o,
                               struct reconcile_result *res,
                               char **ret_system_id)
{
        const struct schema_storage_layout *l = c->mm.spec.storage_layout;
        struct maas_allocate_opts dry = *o;
        struct maas_storage_layout lo;
        struct maas_node n = { 0 };
        struct maas_error me = { 0 };
        int err;

        *ret_system_id = NULL;
        if (!l || !l->type)
                return 0;
        dry.dry_run = true;
        err = maas_allocate(c->w->maas, &dry, &n, &me);
        reconciler_maas_count(c->p, "allocate", err, &me);
        if (err)
                goto out; /* the caller reports it as a failed allocate */
        lo = layout_opts(l);
        maas_error_release(&me);
        err = maas_set_storage_layout(c->w->maas, n.system_id, &lo, NULL, &me);
        reconciler_maas_count(c->p, "set_storage_layout", err, &me);
        if (err == CM_EINVAL || err == CM_ECONFLICT || err == CM_EFORBIDDEN) {
                refused(c, n.system_id, err, &me, res);
                err = 0;
                goto out;
        }
        if (err)
                goto out;
        log_info(MAASMACHINE_LOGGER, "storage layout applied before allocation",
                 "object=%s/%s system_id=%s layout=%s", c->ns, c->name, n.system_id, l->type);
        *ret_system_id = xstrdup(n.system_id);
out:
        if (err && err != MAAS_ENOMATCH)
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                                "unable to apply the storage layout: %s",
                                me.message ? me.message : maas_strerror(err));
        maas_node_release(&n);
        maas_error_release(&me);
        return err;
}

int maasmachine_storage_layout_on(struct maasmachine_ctx *c,
                                  const char *sid,
                                  struct reconcile_result *res,
                                  bool *ret_go)
{
        const struct schema_storage_layout *l = c->mm.spec.storage_layout;
        struct maas_storage_layout lo;
        struct maas_error me = { 0 };
        int err;

        *ret_go = true;
        if (!l || !l->type)
                return 0;
        lo = layout_opts(l);
        err = maas_set_storage_layout(c->w->maas, sid, &lo, NULL, &me);
        reconciler_maas_count(c->p, "set_storage_layout", err, &me);
        if (err == CM_EINVAL || err == CM_ECONFLICT || err == CM_EFORBIDDEN) {
                refused(c, sid, err, &me, res);
                *ret_go = false;
                err = 0;
        } else if (err) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_MACHINE_DEPLOY_FAILED,
                                "unable to apply the storage layout: %s",
                                me.message ? me.message : maas_strerror(err));
        } else {
                log_info(MAASMACHINE_LOGGER, "storage layout applied before allocation",
                         "object=%s/%s system_id=%s layout=%s", c->ns, c->name, sid, l->type);
        }
        maas_error_release(&me);
        return err;
}
