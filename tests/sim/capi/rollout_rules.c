/*
 * capi-sim rollout rules: the pure arithmetic behind rollout.c (see rollout_rules.h and the
 * rules at the top of rollout.c): the machine-template-hash and the MachineSet's name,
 * maxSurge and maxUnavailable, a MachineDeployment's rolling-update step and a
 * KubeadmControlPlane's next step.
 */
#include "rollout_rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static uint32_t fnv32(uint32_t h, const char *s)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 16777619u;
        return h;
}

size_t capi_int_or_percent(const cJSON *v, size_t replicas, bool round_up, size_t def)
{
        const char *s = cJSON_GetStringValue(v);
        char *end;
        unsigned long pct;

        if (cJSON_IsNumber(v))
                return v->valuedouble >= 0 ? (size_t)v->valuedouble : def;
        if (!s || !*s)
                return def;
        pct = strtoul(s, &end, 10);
        if (end == s || strcmp(end, "%") != 0 || pct > 100)
                return def;
        return round_up ? (replicas * pct + 99) / 100 : replicas * pct / 100;
}

const cJSON *capi_rolling_update(const cJSON *owner)
{
        const cJSON *ru = json_find(owner, "spec", "rollout", "strategy", "rollingUpdate", NULL);

        if (!ru) /* v1beta1: MachineDeployment spec.strategy, KCP spec.rolloutStrategy */
                ru = json_find(owner, "spec", "strategy", "rollingUpdate", NULL);
        if (!ru)
                ru = json_find(owner, "spec", "rolloutStrategy", "rollingUpdate", NULL);
        return ru;
}

void capi_md_strategy(const cJSON *md, size_t want, size_t *ret_surge, size_t *ret_unavailable)
{
        const cJSON *ru = capi_rolling_update(md);
        size_t surge = capi_int_or_percent(json_find(ru, "maxSurge", NULL), want, true, 1);
        size_t unav = capi_int_or_percent(json_find(ru, "maxUnavailable", NULL), want, false, 0);

        if (surge == 0 && unav == 0)
                unav = 1;
        *ret_surge = surge;
        *ret_unavailable = unav;
}

void capi_md_template_hash(const cJSON *md, char out[CAPI_HASH_LEN])
{
        static const char *const fields[] = { "infrastructureRef", "bootstrap", "version",
                                              "failureDomain" };
        const cJSON *spec = json_find(md, "spec", "template", "spec", NULL);
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
                const cJSON *f = json_find(spec, fields[i], NULL);
                char *text = f ? cJSON_PrintUnformatted(f) : NULL;

                h = fnv32(fnv32(h, fields[i]), text ? text : "-");
                cJSON_free(text);
        }
        snprintf(out, CAPI_HASH_LEN, "%u", h);
}

void capi_md_set_name(const char *md_name,
                      const char *md_uid,
                      const char *hash,
                      char name[CAPI_SET_NAME_LEN],
                      char label[CAPI_HASH_LEN])
{
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789"; /* Kubernetes' rand */
        const uint32_t n = (uint32_t)(sizeof(alphabet) - 1);
        uint32_t h = fnv32(fnv32(2166136261u, md_uid ? md_uid : ""), hash);
        char suffix[6];

        for (size_t i = 0; i < 5; i++) {
                suffix[i] = alphabet[h % n];
                h = h / n * 2654435761u + (uint32_t)i;
        }
        suffix[5] = '\0';
        snprintf(name, CAPI_SET_NAME_LEN, "%.57s-%s", md_name, suffix);
        snprintf(label, CAPI_HASH_LEN, "%s-%s", hash, suffix);
}

size_t capi_md_rollout_plan(const struct capi_member *m,
                            const bool *is_new,
                            size_t n,
                            size_t want,
                            size_t surge,
                            size_t unavailable,
                            bool *del)
{
        size_t new_active = 0, new_ready = 0, old_active = 0, ready = 0, create = 0, total;
        size_t min_avail = want > unavailable ? want - unavailable : 0;
        size_t new_unavail, may_go;

        for (size_t i = 0; i < n; i++) {
                del[i] = false;
                if (m[i].deleting)
                        continue;
                ready += m[i].ready;
                if (is_new[i]) {
                        new_active++;
                        new_ready += m[i].ready;
                } else {
                        old_active++;
                }
        }
        total = new_active + old_active;
        if (new_active < want && total < want + surge) {
                create = want + surge - total;
                if (create > want - new_active)
                        create = want - new_active;
        }
        if (old_active == 0)
                return create;
        total += create;
        new_unavail = new_active + create - new_ready;
        if (total <= min_avail + new_unavail)
                return create;
        may_go = total - min_avail - new_unavail;
        /* old unavailable Machines first: they cost no availability */
        for (size_t i = 0; i < n && may_go > 0; i++) {
                if (m[i].deleting || is_new[i] || m[i].ready)
                        continue;
                del[i] = true;
                may_go--;
        }
        /* then old available ones, oldest first, while enough stay available */
        for (size_t i = 0; i < n && ready > min_avail; i++) {
                if (m[i].deleting || is_new[i] || !m[i].ready)
                        continue;
                del[i] = true;
                ready--;
        }
        return create;
}

bool capi_kcp_outdated(const struct capi_member *m, const char *tmpl, const char *version)
{
        return (tmpl && strcmp(m->tmpl, tmpl) != 0) ||
               (version && *version && strcmp(m->version, version) != 0);
}

enum capi_kcp_step capi_kcp_rollout_step(const struct capi_member *m,
                                         const bool *outdated,
                                         size_t n,
                                         size_t want,
                                         size_t surge,
                                         size_t *ret_del)
{
        size_t active = 0, n_outdated = 0, best_count = 0;
        const char *best_fd = NULL;

        for (size_t i = 0; i < n; i++) {
                if (m[i].deleting || !m[i].ready)
                        return CAPI_KCP_WAIT; /* one at a time, all healthy first */
                active++;
                n_outdated += outdated[i];
        }
        if (n_outdated == 0)
                return CAPI_KCP_NONE;
        if (active < want + (surge ? 1 : 0))
                return active < want ? CAPI_KCP_NONE : CAPI_KCP_UP;
        /* the failure domain with the most Machines that has an outdated one, its oldest */
        for (size_t i = 0; i < n; i++) {
                size_t count = 0;

                if (!outdated[i])
                        continue;
                for (size_t j = 0; j < n; j++)
                        count += strcmp(m[j].failure_domain, m[i].failure_domain) == 0;
                if (!best_fd || count > best_count) {
                        best_fd = m[i].failure_domain;
                        best_count = count;
                        *ret_del = i;
                }
        }
        return CAPI_KCP_DOWN;
}
