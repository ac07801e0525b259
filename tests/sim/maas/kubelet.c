/*
 * maas-sim kubelets: what the workload Node of a Deployed machine reports, kept beside the
 * machine's power so a test can hang a node and see a power cycle bring it back. capi-sim
 * reads GET /_sim/kubelets and posts each Node's Ready from it (standing in for the
 * kubelet). Ready = Deployed, power on, booted (--boot-seconds after the last power-on of an
 * off machine) and the kubelet "up"; "hung" is cleared by that power-on, "dead" never is.
 * Every function runs under sim.lock.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sim.h"
#include "xalloc.h"

static const char *const names[] = { "up", "hung", "dead" };

void sim_kubelet_powered_on(struct sim *s, struct sim_machine *m)
{
        if (strcmp(m->power_state, "off") != 0)
                return; /* already on: no reboot */
        m->booted_at = sim_now() + s->boot_seconds;
        if (m->kubelet == SIM_KUBELET_HUNG)
                m->kubelet = SIM_KUBELET_UP;
}

static bool ready(const struct sim_machine *m, double now)
{
        return m->status == ST_DEPLOYED && strcmp(m->power_state, "on") == 0 &&
               now >= m->booted_at && m->kubelet == SIM_KUBELET_UP;
}

cJSON *sim_kubelets_json(const struct sim *s)
{
        cJSON *doc = cJSON_CreateObject();
        double now = sim_now();

        for (size_t i = 0; i < s->n_machines; i++) {
                const struct sim_machine *m = &s->machines[i];
                cJSON *o;

                if (m->status != ST_DEPLOYED)
                        continue;
                o = cJSON_AddObjectToObject(doc, m->system_id);
                cJSON_AddBoolToObject(o, "ready", ready(m, now));
                cJSON_AddStringToObject(o, "kubelet", names[m->kubelet]);
        }
        return doc;
}

static int kubelet_of(const char *v, enum sim_kubelet *ret)
{
        for (size_t i = 0; v && i < sizeof(names) / sizeof(names[0]); i++)
                if (strcmp(v, names[i]) == 0) {
                        *ret = (enum sim_kubelet)i;
                        return 0;
                }
        return CM_EINVAL;
}

int sim_kubelets_apply(struct sim *s, const cJSON *doc, char **ret_err)
{
        const cJSON *e;
        enum sim_kubelet k;

        if (!cJSON_IsObject(doc)) {
                *ret_err = xstrdup("a JSON object {\"<system_id>\": \"up|hung|dead\"} is required");
                return CM_EINVAL;
        }
        cJSON_ArrayForEach (e, doc) { /* all checked before any is applied */
                if (!sim_find_machine(s, e->string)) {
                        *ret_err = xasprintf("no machine %s", e->string);
                        return CM_ENOTFOUND;
                }
                if (!cJSON_IsString(e) || kubelet_of(e->valuestring, &k) < 0) {
                        *ret_err = xasprintf("%s: want \"up\", \"hung\" or \"dead\"", e->string);
                        return CM_EINVAL;
                }
        }
        cJSON_ArrayForEach (e, doc) {
                (void)kubelet_of(e->valuestring, &k);
                sim_find_machine(s, e->string)->kubelet = k;
        }
        return 0;
}
