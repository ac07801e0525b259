/*
 * maasremediation_steps: what a MaasRemediation pass asks of MAAS (the power cycle, the
 * power type), of the workload cluster (the Node's Ready) and of Cluster API (the
 * Machine handed back for replacement). See maasremediation.h.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "maasremediation.h"
#include "rfc3339.h"
#include "xalloc.h"

/* Readings of the power state after power_off, CONFIRM_WAIT_MS apart, before the pass gives
 * up and comes back. */
#define CONFIRM_TRIES   10
#define CONFIRM_WAIT_MS 1000

static void count(struct remediation_ctx *c, const char *op, int err, struct maas_error *me)
{
        reconciler_maas_count(c->p, op, err, me);
        maas_error_release(me);
}

/* The MaasMachine power policy (maasmachine_power.c) powers on a Deployed machine it finds
 * off; recording a power-on now keeps it from doing so while this cycle runs and the
 * machine boots. */
static void hold_power_policy(struct remediation_ctx *c)
{
        struct reconciler_entry *e;

        pthread_mutex_lock(&c->p->lock);
        e = reconciler_table_put(&c->p->power_off_reads, c->system_id);
        e->a = 0;
        e->b = c->now;
        pthread_mutex_unlock(&c->p->lock);
}

/* Polls query_power_state until MAAS reports "off": 0, CM_ETIMEDOUT, or a MAAS error. */
static int confirm_off(struct remediation_ctx *c)
{
        struct maas_error me = { 0 };
        char *state = NULL;
        bool off;
        int err;

        for (unsigned i = 0;; i++) {
                err = maas_query_power_state(c->w->maas, c->system_id, &state, &me);
                count(c, "query_power_state", err, &me);
                if (err)
                        return err;
                off = strcmp(state, "off") == 0;
                free(state);
                state = NULL;
                if (off)
                        return 0;
                if (i + 1 == CONFIRM_TRIES || !reconciler_sleep(c->p, CONFIRM_WAIT_MS))
                        return CM_ETIMEDOUT;
        }
}

int remediation_power_cycle(struct remediation_ctx *c)
{
        long long n = (long long)c->r.status.retry_count + 1, of = (long long)c->retry_limit;
        struct maas_error me = { 0 };
        int err;

        hold_power_policy(c);
        reconciler_event(c->p, c->cur, "Normal", "PoweringOff",
                         "Powering off MAAS machine %s (power cycle %lld of %lld)", c->system_id, n,
                         of);
        err = maas_power_off(c->w->maas, c->system_id, NULL, &me);
        count(c, "power_off", err, &me);
        if (err == 0)
                err = confirm_off(c);
        if (err == CM_ETIMEDOUT) {
                reconciler_cond(&c->conds, REMEDIATION_COND_POWER_CYCLED, SCHEMA_CONDITION_FALSE,
                                "PowerOffNotConfirmed",
                                "MAAS machine %s did not report off within %u s", c->system_id,
                                CONFIRM_TRIES * CONFIRM_WAIT_MS / 1000);
                reconciler_event(c->p, c->cur, "Warning", "PowerOffNotConfirmed",
                                 "MAAS machine %s did not report off; trying again", c->system_id);
                return err;
        }
        if (err)
                return err;
        reconciler_event(c->p, c->cur, "Normal", "PoweredOff",
                         "MAAS machine %s reports off; powering it on", c->system_id);
        err = maas_power_on(c->w->maas, c->system_id, "capmaas: MaasRemediation power cycle", NULL,
                            &me);
        count(c, "power_on", err, &me);
        if (err)
                return err;
        reconciler_event(c->p, c->cur, "Normal", "PoweredOn",
                         "MAAS machine %s powered on (power cycle %lld of %lld); waiting up to "
                         "%llu s for its Node to be Ready",
                         c->system_id, n, of, (unsigned long long)(c->timeout_ms / 1000));
        return 0;
}

int remediation_power_type_ok(struct remediation_ctx *c, bool *ret_ok, char **ret_type)
{
        struct maas_node node = { 0 };
        struct maas_error me = { 0 };
        const char *type;
        int err = maas_get_machine(c->w->maas, c->system_id, &node, &me);

        count(c, "get_machine", err, &me);
        if (err)
                return err;
        type = node.power_type ? node.power_type : "";
        *ret_ok = *type && strcmp(type, "manual") != 0;
        *ret_type = xstrdup(type);
        maas_node_release(&node);
        return 0;
}

/* Ready True on node, with its transition at or after since (0 = any). */
static bool ready_since(const cJSON *node, int64_t since)
{
        const cJSON *cond;

        cJSON_ArrayForEach (cond, json_find(node, "status", "conditions", NULL)) {
                const char *type = json_find_str(cond, "type", NULL);
                const char *st = json_find_str(cond, "status", NULL);
                int64_t at = reconciler_parse_time(json_find_str(cond, "lastTransitionTime", NULL));

                if (type && strcmp(type, "Ready") == 0)
                        return st && strcmp(st, "True") == 0 && (since == 0 || at >= since);
        }
        return false;
}

int remediation_node_ready(struct remediation_ctx *c, int64_t since, bool *ret)
{
        const char *node = c->machine ? capi_machine_node_name(kube_object_json(c->machine)) : NULL;
        const char *cluster = c->cluster ? kube_object_name(c->cluster) : NULL;
        struct kube_client *wl = NULL;
        cJSON *obj = NULL;
        int err;

        *ret = false;
        if (!node || !cluster)
                return 0;
        err = reconciler_workload_client(c->w, c->ns, cluster, &wl);
        if (err == 0)
                err = kube_get(wl, &KUBE_RES_NODES, NULL, node, &obj, NULL);
        if (err == 0)
                *ret = ready_since(obj, since);
        else if (wl && err != CM_ENOTFOUND)
                reconciler_workload_drop(c->w, c->ns, cluster);
        cJSON_Delete(obj);
        return err == CM_ENOTFOUND ? 0 : err;
}

/* The condition of this type in list, or a new entry appended to it. */
static cJSON *condition_entry(cJSON *list, const char *type)
{
        cJSON *e;

        cJSON_ArrayForEach (e, list) {
                const char *t = json_find_str(e, "type", NULL);

                if (t && strcmp(t, type) == 0)
                        return e;
        }
        e = cJSON_CreateObject();
        cJSON_AddItemToArray(list, e);
        return e;
}

int remediation_hand_back(struct remediation_ctx *c, const char *message)
{
        const cJSON *m = kube_object_json(c->machine);
        cJSON *cur, *after, *status, *list, *e;
        const char *st = NULL;
        char ts[RFC3339_LEN];
        int err;

        cJSON_ArrayForEach (e, json_find(m, "status", "conditions", NULL)) {
                const char *t = json_find_str(e, "type", NULL);

                if (t && strcmp(t, REMEDIATION_COND_OWNER) == 0)
                        st = json_find_str(e, "status", NULL);
        }
        if (st && strcmp(st, SCHEMA_CONDITION_FALSE) == 0)
                return 0; /* already waiting for its owner */
        cur = cJSON_Duplicate(m, true);
        after = cJSON_Duplicate(m, true);
        if (!cur || !after)
                abort();
        status = json_child_object(after, "status", NULL);
        list = cJSON_GetObjectItemCaseSensitive(status, "conditions");
        if (!cJSON_IsArray(list)) {
                list = cJSON_CreateArray();
                json_set_item(status, "conditions", list);
        }
        e = condition_entry(list, REMEDIATION_COND_OWNER);
        rfc3339_format(c->now, ts);
        json_set_string(e, "type", REMEDIATION_COND_OWNER);
        json_set_string(e, "status", SCHEMA_CONDITION_FALSE);
        json_set_string(e, "reason", REMEDIATION_REASON_WAITING);
        json_set_string(e, "message", message);
        json_set_string(e, "lastTransitionTime", ts);
        if (!c->p->capi.v1beta2) /* a v1beta1 (CAPI 1.10) condition has a severity */
                json_set_string(e, "severity", "Warning");
        err = reconciler_write(c->w, &c->p->capi.machines, &cur, after, false, NULL);
        cJSON_Delete(cur);
        return err;
}
