/*
 * maasmachine_power: the power policy of a Deployed machine MAAS reports off (beyond.md B4):
 * power it on only after two fresh BMC readings, POWER_CONFIRM_MS apart, both say "off",
 * and at most once per POWER_ON_MIN_INTERVAL_S; a power state MAAS cannot read ("unknown",
 * "error") never powers anything on.
 */
#include <stdlib.h>
#include <string.h>

#include "maasmachine_context.h"
#include "maasmachine_steps.h"

#define POWER_ON_MIN_INTERVAL_S 300
/* Spacing of the two fresh BMC readings that must both say "off" before a power-on. */
#define POWER_CONFIRM_MS        3000

static int query_power(struct maasmachine_ctx *c, char **ret)
{
        struct maas_error me = { 0 };
        int err = maas_query_power_state(c->w->maas, c->node.system_id, ret, &me);

        reconciler_maas_count(c->p, "query_power_state", err, &me);
        maas_error_release(&me);
        return err;
}

/* Counts a confirmed "off"; true when this is the second in a row and no power-on was sent
 * in the last POWER_ON_MIN_INTERVAL_S. */
static bool count_off(struct maasmachine_ctx *c, bool off)
{
        struct provider *p = c->p;
        struct reconciler_entry *e;
        bool act = false;

        pthread_mutex_lock(&p->lock);
        e = reconciler_table_put(&p->power_off_reads, c->node.system_id);
        e->a = off ? e->a + 1 : 0;
        if (e->a >= 2 && c->now - e->b >= POWER_ON_MIN_INTERVAL_S) {
                act = true;
                e->a = 0;
                e->b = c->now;
        }
        pthread_mutex_unlock(&p->lock);
        return act;
}

static int power_on(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        struct maas_error me = { 0 };
        int err = maas_power_on(c->w->maas, c->node.system_id, "capmaas: powered off", NULL, &me);

        reconciler_maas_count(c->p, "power_on", err, &me);
        maas_error_release(&me);
        if (err)
                return err;
        reconciler_event(c->p, c->cur, "Normal", "MachinePoweredOn",
                         "MAAS machine %s was confirmed off twice; powering it on",
                         c->node.system_id);
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = 60000;
        return 0;
}

int maasmachine_power(struct maasmachine_ctx *c, struct reconcile_result *res)
{
        char *state = NULL;
        int err = query_power(c, &state);

        if (err)
                return err;
        res->outcome = RECONCILE_REQUEUE_AFTER;
        res->after_ms = POWER_CONFIRM_MS;
        if (strcmp(state, "on") == 0) {
                (void)count_off(c, false);
                c->mm.status.machine_powered = true;
        } else if (strcmp(state, "off") == 0) {
                reconciler_cond(&c->conds, SCHEMA_COND_MACHINE_DEPLOYED, SCHEMA_CONDITION_FALSE,
                                SCHEMA_REASON_MACHINE_POWERED_OFF, "MAAS machine %s is powered off",
                                c->node.system_id);
                if (count_off(c, true))
                        err = power_on(c, res);
        } else {
                (void)count_off(c, false);
                reconciler_event(c->p, c->cur, "Warning", "PowerStateUnknown",
                                 "MAAS reports power state %s for machine %s; leaving it alone",
                                 state, c->node.system_id);
                res->after_ms = 60000;
        }
        free(state);
        return err;
}
