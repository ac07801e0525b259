/*
 * maas-sim allocate and deploy (maas-api.md §7.4, §7.5). Allocate filters Ready, unowned
 * machines by the constraints, picks the cheapest (cpu_count + memory/1024, then internal
 * order), and answers 409 with MAAS's texts when nothing matches; unknown names are 400 field
 * maps. Deploy resolves distro_series against the boot resources the way MAAS does (a custom
 * image name means osystem "custom"). sim.lock is held by the dispatcher.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

enum akind { A_CONSTRAINT, A_IGNORED, A_OPTION };

static const struct {
        const char *key;
        enum akind kind;
} alloc_keys[] = {
        { "name", A_CONSTRAINT },
        { "system_id", A_CONSTRAINT },
        { "arch", A_CONSTRAINT },
        { "cpu_count", A_CONSTRAINT },
        { "mem", A_CONSTRAINT },
        { "tags", A_CONSTRAINT },
        { "not_tags", A_CONSTRAINT },
        { "zone", A_CONSTRAINT },
        { "not_in_zone", A_CONSTRAINT },
        { "pool", A_CONSTRAINT },
        { "not_in_pool", A_CONSTRAINT },
        { "cpu_speed", A_IGNORED },
        { "storage", A_CONSTRAINT },
        { "interfaces", A_IGNORED },
        { "subnets", A_IGNORED },
        { "not_subnets", A_IGNORED },
        { "fabrics", A_IGNORED },
        { "not_fabrics", A_IGNORED },
        { "fabric_classes", A_IGNORED },
        { "not_fabric_classes", A_IGNORED },
        { "devices", A_IGNORED },
        { "deployment_target", A_IGNORED },
        { "not_deployment_target", A_IGNORED },
        { "pod", A_IGNORED },
        { "not_pod", A_IGNORED },
        { "pod_type", A_IGNORED },
        { "not_pod_type", A_IGNORED },
        { "agent_name", A_OPTION },
        { "comment", A_OPTION },
        { "dry_run", A_OPTION },
        { "verbose", A_OPTION },
        { "bridge_all", A_OPTION },
        { "bridge_type", A_OPTION },
        { "bridge_stp", A_OPTION },
        { "bridge_fd", A_OPTION },
        { "op", A_OPTION },
};

struct alloc {
        struct sim_params p; /* query (minus op) then form */
        double cpu, mem;
        struct sim_strv tags, not_tags;
        const char *zone, *pool, *system_id, *name;
        bool dry_run;
        bool has_storage, storage_tags; /* the storage constraint (storage.c) */
        double root_gb;
        size_t n_storage;
};

static int key_kind(const char *k)
{
        for (size_t i = 0; i < ARRAY_SIZE(alloc_keys); i++)
                if (strcmp(alloc_keys[i].key, k) == 0)
                        return (int)alloc_keys[i].kind;
        return -1;
}

static bool parse_number(const struct sim_params *p,
                         const char *k,
                         double *ret,
                         struct sim_resp *rp)
{
        const char *v = sim_params_get(p, k);
        char *end = NULL;
        double d;

        if (!v)
                return true;
        d = strtod(v, &end);
        if (end == v || *end || !isfinite(d)) {
                sim_reply_field_error(rp, k, "Invalid number: %s", v);
                return false;
        }
        *ret = d;
        return true;
}

static bool alloc_check_names(struct sim *s, struct alloc *a, struct sim_resp *rp)
{
        for (size_t i = 0; i < a->p.n; i++)
                if (key_kind(a->p.keys[i]) < 0) {
                        sim_reply_field_error(rp, a->p.keys[i], "No such constraint.");
                        return false;
                }
        if (a->zone && sim_find_zone(s, a->zone) < 0) {
                sim_reply_field_error(rp, "zone", "No such zone: '%s'.", a->zone);
                return false;
        }
        if (a->pool && sim_find_pool(s, a->pool) < 0) {
                sim_reply_field_error(rp, "pool", "No such pool: '%s'.", a->pool);
                return false;
        }
        return sim_check_tags(s, &a->tags, "tags", rp) &&
               sim_check_tags(s, &a->not_tags, "not_tags", rp);
}

static bool alloc_parse(struct sim *s,
                        const struct sim_req *rq,
                        struct alloc *a,
                        struct sim_resp *rp)
{
        const char *dry, *storage;

        for (size_t i = 0; i < rq->query.n; i++)
                if (strcmp(rq->query.keys[i], "op") != 0)
                        sim_params_add(&a->p, rq->query.keys[i], strlen(rq->query.keys[i]),
                                       rq->query.vals[i], strlen(rq->query.vals[i]));
        for (size_t i = 0; i < rq->form.n; i++)
                if (strcmp(rq->form.keys[i], "op") != 0)
                        sim_params_add(&a->p, rq->form.keys[i], strlen(rq->form.keys[i]),
                                       rq->form.vals[i], strlen(rq->form.vals[i]));
        a->zone = sim_params_get(&a->p, "zone");
        a->pool = sim_params_get(&a->p, "pool");
        a->system_id = sim_params_get(&a->p, "system_id");
        a->name = sim_params_get(&a->p, "name");
        sim_split_tags(&a->p, "tags", &a->tags);
        sim_split_tags(&a->p, "not_tags", &a->not_tags);
        storage = sim_params_get(&a->p, "storage");
        if (storage && *storage) {
                a->has_storage = true;
                if (!sim_storage_parse(storage, &a->root_gb, &a->n_storage, &a->storage_tags)) {
                        sim_reply_field_error(rp, "storage",
                                              "Malformed storage constraint, \"%s\".", storage);
                        return false;
                }
        }
        dry = sim_params_get(&a->p, "dry_run");
        if (dry && sim_parse_bool(dry, &a->dry_run) < 0) {
                sim_reply_field_error(rp, "dry_run", "Must be a boolean: %s", dry);
                return false;
        }
        return parse_number(&a->p, "cpu_count", &a->cpu, rp) &&
               parse_number(&a->p, "mem", &a->mem, rp) && alloc_check_names(s, a, rp);
}

static bool none_of(const struct sim_params *p, const char *k, const char *v)
{
        for (size_t i = 0; i < p->n; i++)
                if (strcmp(p->keys[i], k) == 0 && strcmp(p->vals[i], v) == 0)
                        return false;
        return true;
}

static bool arch_ok(const struct sim_params *p, const char *arch)
{
        bool seen = false;

        for (size_t i = 0; i < p->n; i++) {
                size_t n = strlen(p->vals[i]);

                if (strcmp(p->keys[i], "arch") != 0)
                        continue;
                seen = true;
                if (strncmp(arch, p->vals[i], n) == 0 && (arch[n] == '\0' || arch[n] == '/'))
                        return true;
        }
        return !seen;
}

static bool name_ok(const struct sim *s, const struct alloc *a, const struct sim_machine *m)
{
        char *fqdn;
        bool ok;

        if (!a->name || strcmp(a->name, m->hostname) == 0)
                return true;
        fqdn = xasprintf("%s.%s", m->hostname, s->domains[m->domain].name);
        ok = strcmp(a->name, fqdn) == 0;
        free(fqdn);
        return ok;
}

static bool has_all(const struct sim_machine *m, const struct alloc *a)
{
        for (size_t i = 0; i < a->tags.n; i++)
                if (!sim_strv_has(&m->tags, a->tags.v[i]))
                        return false;
        for (size_t i = 0; i < a->not_tags.n; i++)
                if (sim_strv_has(&m->tags, a->not_tags.v[i]))
                        return false;
        return true;
}

/* pool: a->pool's index (found once per allocate, not once per machine) */
static bool candidate(const struct sim *s,
                      const struct alloc *a,
                      ssize_t pool,
                      const struct sim_machine *m)
{
        return m->status == ST_READY && !m->owner && m->cpu_count >= a->cpu &&
               (double)m->memory >= a->mem && has_all(m, a) &&
               (!a->zone || strcmp(s->zones[m->zone].name, a->zone) == 0) &&
               (!a->pool || pool == (ssize_t)m->pool) &&
               none_of(&a->p, "not_in_zone", s->zones[m->zone].name) &&
               none_of(&a->p, "not_in_pool", s->pools[m->pool].name) &&
               (!a->system_id || strcmp(a->system_id, m->system_id) == 0) && name_ok(s, a, m) &&
               arch_ok(&a->p, m->architecture) &&
               (!a->has_storage || sim_storage_fits(m, a->root_gb, a->n_storage, a->storage_tags));
}

static double alloc_cost(const struct sim_machine *m)
{
        return m->cpu_count + (double)m->memory / 1024.0;
}

static int by_cost_cmp(const void *a, const void *b, void *machines)
{
        const struct sim_machine *m = machines;
        size_t x = *(const size_t *)a, y = *(const size_t *)b;
        double cx = alloc_cost(&m[x]), cy = alloc_cost(&m[y]);

        if (cx != cy)
                return cx < cy ? -1 : 1;
        return (x > y) - (x < y);
}

static void by_cost_rebuild(struct sim *s)
{
        s->by_cost = xrealloc(s->by_cost, (s->n_machines ? s->n_machines : 1) * sizeof(size_t));
        for (size_t i = 0; i < s->n_machines; i++)
                s->by_cost[i] = i;
        qsort_r(s->by_cost, s->n_machines, sizeof(size_t), by_cost_cmp, s->machines);
        s->by_cost_stale = false;
}

/* The cheapest candidate, the lowest index among equals: the first one in cost order, so an
 * allocate out of 10 000 machines stops at the first fit instead of weighing them all. */
static struct sim_machine *cheapest(struct sim *s, const struct alloc *a)
{
        ssize_t pool = a->pool ? sim_find_pool(s, a->pool) : -1;

        if (s->by_cost_stale || !s->by_cost)
                by_cost_rebuild(s);
        for (size_t i = 0; i < s->n_machines; i++) {
                struct sim_machine *m = &s->machines[s->by_cost[i]];

                sim_machine_tick(s, m);
                if (candidate(s, a, pool, m))
                        return m;
        }
        return NULL;
}

/* "[('cpu_count', ['64']), ('zone', ['az1'])] (resolved to "cpu_count=64.0 zone=az1")" */
static void no_match_text(const struct alloc *a, struct buf *b)
{
        const struct sim_params *p = &a->p;
        struct buf res;
        bool first = true;

        buf_init(&res, 64 * 1024);
        sim_bprintf(b, "%s", "[");
        for (size_t i = 0; i < p->n; i++) {
                bool dup = false;

                for (size_t j = 0; j < i; j++)
                        dup = dup || strcmp(p->keys[j], p->keys[i]) == 0;
                if (dup)
                        continue;
                sim_bprintf(b, "%s('%s', [", first ? "" : ", ", p->keys[i]);
                for (size_t j = i, n = 0; j < p->n; j++)
                        if (strcmp(p->keys[j], p->keys[i]) == 0)
                                sim_bprintf(b, "%s'%s'", n++ ? ", " : "", p->vals[j]);
                sim_bprintf(b, "%s", "])");
                first = false;
                if (key_kind(p->keys[i]) != A_CONSTRAINT)
                        continue;
                if (strcmp(p->keys[i], "cpu_count") == 0 || strcmp(p->keys[i], "mem") == 0)
                        sim_bprintf(&res, "%s%s=%.1f", res.len ? " " : "", p->keys[i],
                                    strcmp(p->keys[i], "mem") == 0 ? a->mem : a->cpu);
                else
                        sim_bprintf(&res, "%s%s=%s", res.len ? " " : "", p->keys[i],
                                    sim_params_get(p, p->keys[i]));
        }
        sim_bprintf(b, "] (resolved to \"%s\")", res.data ? res.data : "");
        buf_release(&res);
}

static void reply_no_match(const struct alloc *a, struct sim_resp *rp)
{
        struct buf b;

        if (a->system_id) {
                sim_reply_text(rp, 409, "No machine with system ID %s available.", a->system_id);
                return;
        }
        if (a->p.n == 0) {
                sim_reply_text(rp, 409, "No machine available.");
                return;
        }
        buf_init(&b, 128 * 1024);
        no_match_text(a, &b);
        sim_reply_text(rp, 409, "No available machine matches constraints: %s", b.data);
        buf_release(&b);
}

static void allocate_to(struct sim_machine *m, const struct alloc *a, const char *user)
{
        const char *agent = sim_params_get(&a->p, "agent_name");
        const char *comment = sim_params_get(&a->p, "comment");

        free(m->status_message);
        m->status_message = xasprintf("From 'Ready' to 'Allocated' (to %s)", user);
        m->status = ST_ALLOCATED;
        sim_set(&m->owner, user);
        sim_set(&m->agent_name, agent);
        sim_set(&m->comment, comment);
}

void sim_machines_allocate(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct alloc a = { .cpu = 0, .mem = 0 };
        struct sim_machine *m;
        cJSON *doc;

        if (!alloc_parse(s, rq, &a, rp))
                goto out;
        m = cheapest(s, &a);
        if (!m) {
                reply_no_match(&a, rp);
                goto out;
        }
        if (!a.dry_run)
                allocate_to(m, &a, rq->user);
        doc = sim_machine_json(s, m);
        cJSON_AddObjectToObject(doc, "constraints_by_type");
        sim_reply_json(rp, doc);
out:
        sim_params_release(&a.p);
        sim_strv_release(&a.tags);
        sim_strv_release(&a.not_tags);
}

/* --- deploy ---------------------------------------------------------------------------------- */

static const char *const ubuntu_aliases[][2] = {
        { "22.04", "jammy" },
        { "20.04", "focal" },
        { "24.04", "noble" },
        { "18.04", "bionic" },
};

/* Finds the boot resource a series names; sets osystem/release (owned by the caller). */
static bool resolve_series(const struct sim *s, const char *series, char **ret_os, char **ret_rel)
{
        const char *slash = strchr(series, '/');

        for (size_t i = 0; i < ARRAY_SIZE(ubuntu_aliases); i++)
                if (strcmp(series, ubuntu_aliases[i][0]) == 0)
                        series = ubuntu_aliases[i][1];
        for (size_t i = 0; i < s->n_boots; i++) {
                const struct sim_boot *b = &s->boots[i];
                const char *bs = strchr(b->name, '/');
                const char *brel = bs ? bs + 1 : b->name;
                bool match = slash ? strcmp(b->name, series) == 0 : strcmp(brel, series) == 0;

                if (!match)
                        continue;
                *ret_os = bs ? xstrndup(b->name, (size_t)(bs - b->name)) : xstrdup("custom");
                *ret_rel = xstrdup(brel);
                return true;
        }
        return false;
}

static void reply_bad_series(const struct sim *s, const char *series, struct sim_resp *rp)
{
        struct buf b;

        buf_init(&b, 64 * 1024);
        sim_bprintf(&b, "%s", "''");
        for (size_t i = 0; i < s->n_boots; i++)
                sim_bprintf(&b, ", '%s%s'", strchr(s->boots[i].name, '/') ? "" : "custom/",
                            s->boots[i].name);
        sim_reply_field_error(rp, "distro_series",
                              "'%s' is not a valid distro_series.  It should be one of: %s.",
                              series, b.data);
        buf_release(&b);
}

struct deploy_opts {
        char *os, *rel;
        bool ephemeral;
};

static bool deploy_parse(const struct sim *s,
                         const struct sim_params *p,
                         struct deploy_opts *o,
                         struct sim_resp *rp)
{
        const char *series = sim_params_get(p, "distro_series");
        const char *eph = sim_params_get(p, "ephemeral_deploy");
        static const char *const vmhost[] = { "install_kvm", "register_vmhost" };
        bool b = false;

        if (!series || !*series)
                series = "jammy"; /* default_distro_series */
        if (!resolve_series(s, series, &o->os, &o->rel)) {
                reply_bad_series(s, series, rp);
                return false;
        }
        if (eph && sim_parse_bool(eph, &o->ephemeral) < 0) {
                sim_reply_field_error(rp, "ephemeral_deploy", "Must be a boolean: %s", eph);
                return false;
        }
        for (size_t i = 0; i < ARRAY_SIZE(vmhost); i++) {
                const char *v = sim_params_get(p, vmhost[i]);

                if (v && (sim_parse_bool(v, &b) < 0 || b)) {
                        sim_reply_field_error(rp, vmhost[i], "KVM pods are not supported.");
                        return false;
                }
        }
        return true;
}

/* 0 when m may be deployed by user (allocating a Ready machine first); else fills rp. */
static int deploy_state(struct sim_machine *m, const char *user, struct sim_resp *rp)
{
        if (m->owner && strcmp(m->owner, user) != 0 && strcmp(user, "admin") != 0) {
                sim_reply_text(rp, 409, "Can't allocate a machine belonging to another user.");
                return CM_ECONFLICT;
        }
        if (m->status == ST_READY && !m->owner) {
                free(m->status_message);
                m->status_message = xasprintf("From 'Ready' to 'Allocated' (to %s)", user);
                m->status = ST_ALLOCATED;
                sim_set(&m->owner, user);
        }
        if (m->status != ST_ALLOCATED) {
                sim_reply_text(rp, 409, "Can't deploy a machine that is in the '%s' state",
                               sim_status_name(m->status));
                return CM_ECONFLICT;
        }
        return 0;
}

static void apply_deploy(struct sim *s,
                         struct sim_machine *m,
                         const struct sim_params *p,
                         struct deploy_opts *o)
{
        const char *agent = sim_params_get(p, "agent_name");

        free(m->osystem);
        free(m->distro_series);
        m->osystem = o->os;
        m->distro_series = o->rel;
        o->os = o->rel = NULL;
        m->ephemeral = o->ephemeral;
        sim_set(&m->user_data, sim_params_get(p, "user_data")); /* stored verbatim */
        sim_set(&m->hwe_kernel, sim_params_get(p, "hwe_kernel"));
        if (agent)
                sim_set(&m->agent_name, agent);
        free(m->status_message);
        m->status_message = xstrdup("From 'Allocated' to 'Deploying'");
        m->status = ST_DEPLOYING;
        m->deadline = sim_now() + s->deploy_seconds;
        sim_set(&m->power_state, "on");
        sim_machine_claim_auto(s, m);
}

void sim_machine_deploy(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = sim_find_machine(s, rq->arg);
        struct deploy_opts o = { 0 };
        cJSON *doc;

        if (!m) {
                sim_reply_text(rp, 404, "No Machine matches the given query.");
                return;
        }
        sim_machine_tick(s, m);
        if (!deploy_parse(s, &rq->form, &o, rp) ||
            !sim_kernel_ok(s, m, o.os, o.rel, sim_params_get(&rq->form, "hwe_kernel"), rp) ||
            deploy_state(m, rq->user, rp) < 0)
                goto out;
        apply_deploy(s, m, &rq->form, &o);
        doc = sim_machine_json(s, m);
        sim_reply_json(rp, doc);
out:
        free(o.os);
        free(o.rel);
}
