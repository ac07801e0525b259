/*
 * maas-sim machine handlers: list with filters, read, update, allocate, deploy, release
 * (single and bulk), power on/off/query and set_owner_data, following maas-api.md §7.3–7.7.
 * Every handler runs with sim.lock held (taken by the dispatcher) and never blocks.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

#define MSG_NO_MACHINE "No Machine matches the given query."

static bool is_admin(const char *user)
{
        return user && strcmp(user, "admin") == 0;
}

/* Owned by someone else and the caller is not an admin. */
static bool forbidden(const struct sim_machine *m, const char *user)
{
        return !is_admin(user) && m->owner && (!user || strcmp(m->owner, user) != 0);
}

static struct sim_machine *get_machine(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = sim_find_machine(s, rq->arg);

        if (!m) {
                sim_reply_text(rp, 404, MSG_NO_MACHINE);
                return NULL;
        }
        sim_machine_tick(s, m);
        return m;
}

static void reply_machine(struct sim *s, struct sim_machine *m, struct sim_resp *rp)
{
        sim_reply_json(rp, sim_machine_json(s, m));
}

static void set_status(struct sim_machine *m, enum sim_status st, const char *user)
{
        free(m->status_message);
        m->status_message = xasprintf("From '%s' to '%s'%s%s%s", sim_status_name(m->status),
                                      sim_status_name(st), user ? " (to " : "", user ? user : "",
                                      user ? ")" : "");
        m->status = st;
}

/* Splits tag values on commas and whitespace (legacy "tags=a,b" form). */
void sim_split_tags(const struct sim_params *p, const char *key, struct sim_strv *out)
{
        for (size_t i = 0; i < p->n; i++) {
                const char *v = p->vals[i];

                if (strcmp(p->keys[i], key) != 0)
                        continue;
                while (*v) {
                        size_t n = strcspn(v, ", \t");
                        char *t;

                        if (n) {
                                t = xstrndup(v, n);
                                sim_strv_add(out, t);
                                free(t);
                        }
                        v += n + (v[n] ? 1 : 0);
                }
        }
}

static bool has_all_tags(const struct sim_machine *m, const struct sim_strv *tags)
{
        for (size_t i = 0; i < tags->n; i++)
                if (!sim_strv_has(&m->tags, tags->v[i]))
                        return false;
        return true;
}

/* 400 {"tags": ["No such tag(s): 'a', 'b'."]} when any tag is unknown; returns true if ok. */
bool sim_check_tags(const struct sim *s,
                    const struct sim_strv *tags,
                    const char *field,
                    struct sim_resp *rp)
{
        struct buf b;
        bool ok = true;

        buf_init(&b, 4096);
        for (size_t i = 0; i < tags->n; i++) {
                if (sim_find_tag(s, tags->v[i]) >= 0)
                        continue;
                sim_bprintf(&b, "%s'%s'", ok ? "" : ", ", tags->v[i]);
                ok = false;
        }
        if (!ok)
                sim_reply_field_error(rp, field, "No such tag(s): %s.", b.data);
        buf_release(&b);
        return ok;
}

/* --- list ---------------------------------------------------------------------------------- */

static const char *const list_keys[] = { "op",     "id",         "hostname",   "zone",
                                         "pool",   "tags",       "status",     "owner",
                                         "domain", "agent_name", "mac_address" };

/*
 * A list's filters: for each key, the values asked for (any of them matches, compared
 * without case, as MAAS's filters do), sorted so a machine is matched in O(log n) however
 * many values a query names (the provider's fleet lists name a hundred agent names).
 */
enum { F_HOSTNAME, F_ZONE, F_POOL, F_DOMAIN, F_AGENT, F_OWNER, F_STATUS, F_MAC, F_N };

static const char *const filter_keys[F_N] = { "hostname",   "zone",  "pool",   "domain",
                                              "agent_name", "owner", "status", "mac_address" };

struct value_set {
        const char **v; /* borrowed from the query */
        size_t n;
};

struct list_filter {
        struct value_set keys[F_N];
};

static int casecmp_p(const void *a, const void *b)
{
        return strcasecmp(*(const char *const *)a, *(const char *const *)b);
}

static void filter_build(const struct sim_params *q, struct list_filter *f)
{
        *f = (struct list_filter){ 0 };
        for (size_t i = 0; i < q->n; i++)
                for (size_t k = 0; k < F_N; k++) {
                        struct value_set *vs = &f->keys[k];

                        if (strcmp(q->keys[i], filter_keys[k]) != 0)
                                continue;
                        vs->v = xrealloc(vs->v, (vs->n + 1) * sizeof(*vs->v));
                        vs->v[vs->n++] = q->vals[i];
                }
        for (size_t k = 0; k < F_N; k++)
                if (f->keys[k].n > 1)
                        qsort(f->keys[k].v, f->keys[k].n, sizeof(char *), casecmp_p);
}

static void filter_release(struct list_filter *f)
{
        for (size_t k = 0; k < F_N; k++)
                free(f->keys[k].v);
}

/* Any-of match of key k's values against the candidate string v (no values: a match). */
static bool any_of(const struct list_filter *f, int k, const char *v)
{
        const struct value_set *vs = &f->keys[k];

        if (vs->n == 0)
                return true;
        return v && bsearch(&v, vs->v, vs->n, sizeof(char *), casecmp_p) != NULL;
}

static bool status_matches(const struct list_filter *f, const struct sim_machine *m)
{
        char name[48];
        size_t i;
        const char *sn = sim_status_name(m->status);

        for (i = 0; sn[i] && i + 1 < sizeof(name); i++)
                name[i] = sn[i] == ' ' ? '_' : (char)tolower((unsigned char)sn[i]);
        name[i] = '\0';
        return any_of(f, F_STATUS, name);
}

static bool mac_matches(const struct list_filter *f, const struct sim_machine *m)
{
        if (f->keys[F_MAC].n == 0)
                return true;
        for (size_t i = 0; i < m->n_ifaces; i++)
                if (any_of(f, F_MAC, m->ifaces[i].mac))
                        return true;
        return false;
}

static bool list_match(const struct sim *s,
                       const struct list_filter *f,
                       const struct sim_machine *m,
                       const struct sim_strv *tags)
{
        return any_of(f, F_HOSTNAME, m->hostname) && any_of(f, F_ZONE, s->zones[m->zone].name) &&
               any_of(f, F_POOL, s->pools[m->pool].name) &&
               any_of(f, F_DOMAIN, s->domains[m->domain].name) &&
               any_of(f, F_AGENT, m->agent_name) && any_of(f, F_OWNER, m->owner) &&
               status_matches(f, m) && mac_matches(f, m) && has_all_tags(m, tags);
}

static bool list_params_ok(const struct sim *s, const struct sim_params *p, struct sim_resp *rp)
{
        for (size_t i = 0; i < p->n; i++) {
                const char *k = p->keys[i];
                bool known = false;

                for (size_t j = 0; j < ARRAY_SIZE(list_keys); j++)
                        known = known || strcmp(k, list_keys[j]) == 0;
                if (!known) {
                        sim_reply_field_error(rp, k, "No such constraint.");
                        return false;
                }
                if (strcmp(k, "zone") == 0 && sim_find_zone(s, p->vals[i]) < 0) {
                        sim_reply_field_error(rp, k, "No such zone: '%s'.", p->vals[i]);
                        return false;
                }
                if (strcmp(k, "pool") == 0 && sim_find_pool(s, p->vals[i]) < 0) {
                        sim_reply_field_error(rp, k, "No such pool: '%s'.", p->vals[i]);
                        return false;
                }
        }
        return true;
}

static int index_cmp(const void *a, const void *b)
{
        size_t x = *(const size_t *)a, y = *(const size_t *)b;

        return (x > y) - (x < y);
}

/*
 * The machines a list may answer with, in list order: all of them, or, when the query names
 * system ids (the provider's fleet lists name hundreds), only those, found by index.
 */
static size_t list_candidates(struct sim *s, const struct sim_params *q, size_t **ret)
{
        size_t n = 0, *idx = xmalloc((q->n ? q->n : 1) * sizeof(*idx));
        bool by_id = false;

        for (size_t i = 0; i < q->n; i++) {
                struct sim_machine *m;

                if (strcmp(q->keys[i], "id") != 0)
                        continue;
                by_id = true;
                if ((m = sim_find_machine(s, q->vals[i])) != NULL)
                        idx[n++] = (size_t)(m - s->machines);
        }
        if (!by_id) {
                idx = xrealloc(idx, (s->n_machines ? s->n_machines : 1) * sizeof(*idx));
                for (n = 0; n < s->n_machines; n++)
                        idx[n] = n;
        }
        qsort(idx, n, sizeof(*idx), index_cmp);
        *ret = idx;
        return n;
}

/* Appends one machine (consumed) to a list's body: printed and freed one at a time, the
 * answer for 10 000 machines never holds 10 000 trees. */
static void list_append(struct buf *body, cJSON *machine)
{
        char *text = cJSON_PrintUnformatted(machine);

        if (!text || buf_append_str(body, body->len ? "," : "[") < 0 ||
            buf_append_str(body, text) < 0)
                abort(); /* past SIZE_MAX / 2 bytes: no list of machines gets there */
        free(text);
        cJSON_Delete(machine);
}

static void machines_list(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_strv tags = { 0 };
        struct list_filter f = { 0 };
        size_t *idx = NULL, n;
        struct buf body;

        sim_split_tags(&rq->query, "tags", &tags);
        if (!list_params_ok(s, &rq->query, rp) || !sim_check_tags(s, &tags, "tags", rp))
                goto out;
        filter_build(&rq->query, &f);
        n = list_candidates(s, &rq->query, &idx);
        buf_init(&body, SIZE_MAX / 2);
        for (size_t i = 0; i < n; i++) {
                struct sim_machine *m = &s->machines[idx[i]];

                if (i > 0 && idx[i] == idx[i - 1])
                        continue; /* an id named twice */
                sim_machine_tick(s, m);
                if (list_match(s, &f, m, &tags))
                        list_append(&body, sim_machine_json(s, m));
        }
        sim_reply_raw(rp, &body);
out:
        free(idx);
        filter_release(&f);
        sim_strv_release(&tags);
}

static void machines_list_allocated(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        cJSON *arr = cJSON_CreateArray();

        for (size_t i = 0; i < s->n_machines; i++) {
                struct sim_machine *m = &s->machines[i];

                sim_machine_tick(s, m);
                if (m->owner && rq->user && strcmp(m->owner, rq->user) == 0)
                        cJSON_AddItemToArray(arr, sim_machine_json(s, m));
        }
        sim_reply_json(rp, arr);
}

/* --- read / update ------------------------------------------------------------------------- */

static void machine_read(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = get_machine(s, rq, rp);

        if (m)
                reply_machine(s, m, rp);
}

static bool parse_int(const char *v, long long min, long long *ret)
{
        char *end = NULL;
        long long x;

        if (!v || !*v)
                return false;
        x = strtoll(v, &end, 10);
        if (*end || x < min)
                return false;
        *ret = x;
        return true;
}

static bool update_placement(struct sim *s,
                             struct sim_machine *m,
                             const struct sim_params *p,
                             struct sim_resp *rp)
{
        const char *zone = sim_params_get(p, "zone");
        const char *pool = sim_params_get(p, "pool");
        ssize_t zi = zone ? sim_find_zone(s, zone) : (ssize_t)m->zone;
        ssize_t pi = pool ? sim_find_pool(s, pool) : (ssize_t)m->pool;

        if (zi < 0) {
                sim_reply_field_error(rp, "zone",
                                      "Select a valid choice. %s is not one of the "
                                      "available choices.",
                                      zone);
                return false;
        }
        if (pi < 0) {
                sim_reply_field_error(rp, "pool",
                                      "Select a valid choice. %s is not one of the "
                                      "available choices.",
                                      pool);
                return false;
        }
        m->zone = (size_t)zi;
        m->pool = (size_t)pi;
        return true;
}

static void machine_update(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = get_machine(s, rq, rp);
        const char *swap, *host, *desc;
        long long v = 0;

        if (!m)
                return;
        if (forbidden(m, rq->user)) {
                sim_reply_text(rp, 403, "User is not allowed access to this API.");
                return;
        }
        swap = sim_params_get(&rq->form, "swap_size");
        host = sim_params_get(&rq->form, "hostname");
        desc = sim_params_get(&rq->form, "description");
        if (swap && !parse_int(swap, 0, &v)) {
                sim_reply_field_error(rp, "swap_size", "Invalid size for swap: %s", swap);
                return;
        }
        if (host && !*host) {
                sim_reply_field_error(rp, "hostname", "This field cannot be blank.");
                return;
        }
        if (!update_placement(s, m, &rq->form, rp))
                return;
        if (swap)
                m->swap_size = v;
        if (host)
                sim_set(&m->hostname, host);
        if (desc)
                sim_set(&m->description, desc);
        reply_machine(s, m, rp);
}

/* --- owner data ---------------------------------------------------------------------------- */

static void machine_set_owner_data(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = get_machine(s, rq, rp);

        if (!m)
                return;
        if (!m->owner || !rq->user || strcmp(m->owner, rq->user) != 0) {
                sim_reply_text(rp, 409, "Cannot set workload annotation: it hasn't been acquired.");
                return;
        }
        for (size_t i = 0; i < rq->form.n; i++) {
                const char *k = rq->form.keys[i];

                if (strcmp(k, "op") == 0)
                        continue;
                cJSON_DeleteItemFromObjectCaseSensitive(m->owner_data, k);
                if (*rq->form.vals[i])
                        cJSON_AddStringToObject(m->owner_data, k, rq->form.vals[i]);
        }
        reply_machine(s, m, rp);
}

/* --- power ----------------------------------------------------------------------------------- */

static void machine_power_on(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = get_machine(s, rq, rp);

        if (!m)
                return;
        if (forbidden(m, rq->user)) {
                sim_reply_text(rp, 403, "User is not allowed access to this API.");
                return;
        }
        if (!m->owner) {
                sim_reply_text(rp, 409, "Can't start node: it hasn't been allocated.");
                return;
        }
        sim_kubelet_powered_on(s, m);
        sim_set(&m->power_state, "on");
        reply_machine(s, m, rp);
}

static void machine_power_off(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = get_machine(s, rq, rp);
        const char *mode = sim_params_get(&rq->form, "stop_mode");

        if (!m)
                return;
        if (forbidden(m, rq->user)) {
                sim_reply_text(rp, 403, "User is not allowed access to this API.");
                return;
        }
        if (mode && strcmp(mode, "hard") != 0 && strcmp(mode, "soft") != 0) {
                sim_reply_field_error(rp, "stop_mode", "Select a valid choice.");
                return;
        }
        sim_set(&m->power_state, "off");
        reply_machine(s, m, rp);
}

static void machine_query_power(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = get_machine(s, rq, rp);
        cJSON *doc;

        if (!m)
                return;
        if (sim_strv_has(&s->faults.bmc_unknown, m->system_id))
                sim_set(&m->power_state, "unknown");
        doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "state", m->power_state);
        sim_reply_json(rp, doc);
}

/* --- release ------------------------------------------------------------------------------- */

static bool releasable(enum sim_status st)
{
        static const enum sim_status ok[] = {
                ST_ALLOCATED,           ST_DEPLOYING,       ST_DEPLOYED,
                ST_FAILED_DEPLOYMENT,   ST_BROKEN,          ST_RESERVED,
                ST_FAILED_DISK_ERASING, ST_FAILED_RELEASING
        };

        for (size_t i = 0; i < ARRAY_SIZE(ok); i++)
                if (ok[i] == st)
                        return true;
        return false;
}

/* erase: NULL, or "full", "quick" or "secure" (what Disk erasing does to the disks). */
static void start_release(struct sim *s, struct sim_machine *m, const char *erase, const char *user)
{
        if (!erase && strcmp(m->power_state, "off") == 0 && s->release_seconds <= 0) {
                sim_machine_finish_release(m);
                return;
        }
        m->erase_mode = erase;
        set_status(m, erase ? ST_DISK_ERASING : ST_RELEASING, user);
        m->deadline = sim_now() + s->release_seconds;
}

static void machine_release(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = get_machine(s, rq, rp);
        static const char *const flags[] = { "erase", "quick_erase", "secure_erase" };
        bool set[3] = { false, false, false };

        if (!m)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(flags); i++) {
                const char *e = sim_params_get(&rq->form, flags[i]);

                if (e && sim_parse_bool(e, &set[i]) < 0) {
                        sim_reply_field_error(rp, flags[i], "Must be a boolean: %s", e);
                        return;
                }
        }
        if (forbidden(m, rq->user)) {
                sim_reply_text(rp, 403, "User is not allowed access to this API.");
                return;
        }
        if (m->status != ST_READY && m->status != ST_RELEASING && m->status != ST_DISK_ERASING) {
                if (!releasable(m->status)) {
                        sim_reply_text(rp, 409,
                                       "Machine cannot be released in its current state ('%s').",
                                       sim_status_name(m->status));
                        return;
                }
                /* secure_erase and quick_erase choose how erase wipes; alone they do not */
                start_release(s, m,
                              !set[0]  ? NULL
                              : set[2] ? "secure"
                              : set[1] ? "quick"
                                       : "full",
                              rq->user);
        }
        reply_machine(s, m, rp);
}

/* Checks every id of a bulk release; returns the first error status (0 = all fine). */
static unsigned bulk_check(struct sim *s, const struct sim_req *rq, struct buf *bad)
{
        static const unsigned order[] = { 400, 403, 409 };
        unsigned worst = 0;

        for (size_t pass = 0; pass < ARRAY_SIZE(order) && !worst; pass++) {
                for (size_t i = 0; i < rq->form.n; i++) {
                        struct sim_machine *m;
                        unsigned st = 0;

                        if (strcmp(rq->form.keys[i], "machines") != 0)
                                continue;
                        m = sim_find_machine(s, rq->form.vals[i]);
                        if (m)
                                sim_machine_tick(s, m);
                        if (!m)
                                st = 400;
                        else if (forbidden(m, rq->user))
                                st = 403;
                        else if (m->status != ST_READY && m->status != ST_RELEASING &&
                                 m->status != ST_DISK_ERASING && !releasable(m->status))
                                st = 409;
                        if (st != order[pass])
                                continue;
                        if (st == 409)
                                sim_bprintf(bad, "%s%s ('%s')", worst ? ", " : "", m->system_id,
                                            sim_status_name(m->status));
                        else
                                sim_bprintf(bad, "%s%s", worst ? ", " : "", rq->form.vals[i]);
                        worst = st;
                }
        }
        return worst;
}

static void machines_release(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct buf bad;
        unsigned st;
        cJSON *arr;

        buf_init(&bad, 64 * 1024);
        st = bulk_check(s, rq, &bad);
        if (st == 400)
                sim_reply_text(rp, 400, "Unknown machine(s): %s.", bad.data);
        else if (st == 403)
                sim_reply_text(rp, 403,
                               "You don't have the required permission to release the "
                               "following machine(s): %s.",
                               bad.data);
        else if (st == 409)
                sim_reply_text(rp, 409,
                               "Machine(s) cannot be released in their current state: "
                               "%s.",
                               bad.data);
        buf_release(&bad);
        if (st)
                return;
        arr = cJSON_CreateArray();
        for (size_t i = 0; i < rq->form.n; i++) {
                struct sim_machine *m;

                if (strcmp(rq->form.keys[i], "machines") != 0)
                        continue;
                m = sim_find_machine(s, rq->form.vals[i]);
                if (!releasable(m->status))
                        continue;
                start_release(s, m, NULL, rq->user);
                cJSON_AddItemToArray(arr, cJSON_CreateString(m->system_id));
        }
        sim_reply_json(rp, arr);
}

static void machine_delete(struct sim *s, const struct sim_req *rq, struct sim_resp *rp)
{
        struct sim_machine *m = get_machine(s, rq, rp);

        if (!m)
                return;
        if (!is_admin(rq->user)) {
                sim_reply_text(rp, 403, "User is not allowed access to this API.");
                return;
        }
        if (m->pod_id) { /* a composed VM: MAAS decomposes it on its host (pods.c) */
                sim_remove_machine(s, m);
                rp->status = 204;
                rp->body = xstrdup("");
                rp->ctype = "text/plain";
                return;
        }
        sim_reply_text(rp, 409, "maas-sim does not delete machines; use /_sim/ to reset.");
}

const struct sim_op sim_ops_machines[] = {
        { "GET", NULL, machines_list },
        { "GET", "list_allocated", machines_list_allocated },
        { "POST", "allocate", sim_machines_allocate },
        { "POST", "release", machines_release },
        { NULL, NULL, NULL },
};

const struct sim_op sim_ops_machine[] = {
        { "GET", NULL, machine_read },
        { "PUT", NULL, machine_update },
        { "DELETE", NULL, machine_delete },
        { "POST", "deploy", sim_machine_deploy },
        { "POST", "set_storage_layout", sim_machine_set_storage_layout },
        { "POST", "release", machine_release },
        { "POST", "power_on", machine_power_on },
        { "POST", "power_off", machine_power_off },
        { "GET", "query_power_state", machine_query_power },
        { "POST", "set_owner_data", machine_set_owner_data },
        { "POST", "set_workload_annotations", machine_set_owner_data },
        { NULL, NULL, NULL },
};
