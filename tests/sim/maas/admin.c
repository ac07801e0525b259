/*
 * maas-sim admin endpoint (/_sim/, no auth, loopback only): state dump, request log (a
 * bounded ring, with uncapped reads, writes and peakRps, the most requests in any one
 * second), fault injection and run-time inventory additions. Also the fault decision used
 * by every API request. Functions here take sim.lock themselves, except
 * sim_fault_pick() which runs under the dispatcher's lock.
 *
 * Fault document (POST /_sim/faults, also built from the command-line flags):
 *   {"clear": true, "error_rate": {"machines.allocate": 0.5, "*": 0.1}, "error_status": 500,
 *    "latency_ms": 50, "unavailable": {"count": 3, "retry_after": 1, "op": "machine.read",
 *    "status": 503 (the default) or 429},
 *    "fail_next": {"count": 1, "status": 500, "op": "machine.deploy", "after": 0},
 *    "fail_deploy": ["sysid"], "bmc_unknown": ["sysid"], "power_off": ["sysid"],
 *    "release": ["sysid"], "delete": ["sysid"], "allocate_to": {"sysid": "user2"},
 *    "commission": ["sysid"], "mark_broken": ["sysid"], "compose_delay_ms": 3000}
 * fail_next fails the next count requests matching op once `after` more have passed.
 * power_off and the five after it are an operator's actions behind the provider's back, done
 * at once: power off; release (Ready, no owner, owner data and agent_name wiped, as MAAS's
 * release); delete the machine (its API then answers 404); release and allocate to another
 * user (Allocated, that owner); release and recommission (Commissioning until the sim
 * stops: the host is being fixed; its links back to the initial AUTO ones, as commissioning
 * redoes them); mark Broken.
 * GET /_sim/state lists each machine with, beyond its API fields, tag_names (tags survive
 * release, as in MAAS), disk_marker (the data on its disks: written by the first deploy after
 * an erase, cleared by a release with erase, kept by one without; null when none), erasures
 * (how many releases erased it) and erase_mode ("full", "quick" or "secure" while Disk
 * erasing); then the DNS resources, the reservations and the tags ({name, comment}).
 * GET /_sim/kubelets and POST /_sim/kubelets {"<system_id>": "hung" | "dead" | "up"}: the
 * kubelet of a Deployed machine (kubelet.c; capi-sim's Nodes follow it); a power cycle
 * (off, then on) clears "hung" after --boot-seconds.
 * POST /_sim/keys {"add": "CK:TK:TS"[, "user": "user2"]} or {"revoke": "CK"}: MAAS's key
 * rotation (a new key accepted, an old one refused with 401 from then on).
 * GET /_sim/pods lists the VM hosts with their VMs; POST /_sim/pods adds VM hosts (as the
 * inventory's vm_hosts, pods.c).
 * POST /_sim/subnets adds subnets ({cidr, name, gateway_ip, dns_servers, vid}, as the
 * inventory's). GET /_sim/requests lists the request log: method, path, op, status, and the
 * authenticated user, the agent_name parameter and the id= parameters when there are. Op keys are
 * "<resource>.<op or read|create|update|delete>", e.g. "machines.allocate", "machine.deploy",
 * "machine.read", "dnsresource.update"; a bare op name ("deploy") matches the part after the dot;
 * "*" or no op matches every request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "json.h"
#include "sim.h"
#include "xalloc.h"

void sim_faults_release(struct sim_faults *f)
{
        for (size_t i = 0; i < f->n_rates; i++)
                free(f->rates[i].op);
        free(f->rates);
        free(f->unavailable_op);
        free(f->fail_op);
        sim_strv_release(&f->fail_deploy);
        sim_strv_release(&f->bmc_unknown);
        *f = (struct sim_faults){ .error_status = 500 };
}

static bool op_matches(const char *want, const char *opkey)
{
        const char *dot = strchr(opkey, '.');

        return !want || strcmp(want, "*") == 0 || strcmp(want, opkey) == 0 ||
               (dot && strcmp(want, dot + 1) == 0);
}

static uint64_t next_random(struct sim *s)
{
        uint64_t x = s->rng ? s->rng : 0x9e3779b97f4a7c15ULL;

        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s->rng = x;
        return x;
}

unsigned sim_fault_pick(struct sim *s, const char *opkey, unsigned *ret_retry_after)
{
        struct sim_faults *f = &s->faults;

        if (f->unavailable && op_matches(f->unavailable_op, opkey)) {
                f->unavailable--;
                *ret_retry_after = f->retry_after;
                return f->unavailable_status;
        }
        if (f->fail_next && op_matches(f->fail_op, opkey)) {
                if (f->fail_after) {
                        f->fail_after--;
                        return 0;
                }
                f->fail_next--;
                return f->fail_status;
        }
        for (size_t i = 0; i < f->n_rates; i++) {
                double u = (double)(next_random(s) >> 11) / 9007199254740992.0;

                if (op_matches(f->rates[i].op, opkey) && u < f->rates[i].rate)
                        return f->error_status;
        }
        return 0;
}

/* Called with s->lock held: counts one request in the second it arrived, keeping the peak. */
static void count_rate(struct sim *s)
{
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        if (ts.tv_sec != s->rate_second) {
                s->rate_second = ts.tv_sec;
                s->rate_count = 0;
        }
        if (++s->rate_count > s->peak_rps)
                s->peak_rps = s->rate_count;
}

/* The form as "k=v&k=v" into out (cut at len); user_data (cloud-init with its tokens, and
 * large) is left out. */
static void log_params(char *out, size_t len, const struct sim_params *p)
{
        size_t k = 0;

        out[0] = '\0';
        for (size_t i = 0; i < p->n && k < len; i++) {
                if (strcmp(p->keys[i], "user_data") == 0)
                        continue;
                k += (size_t)snprintf(out + k, len - k, "%s%s=%s", k ? "&" : "", p->keys[i],
                                      p->vals[i]);
        }
}

/* The id= parameters that fit whole into e->ids, comma-joined. */
static void log_ids(struct sim_log_entry *e, const struct sim_params *q)
{
        size_t n = 0;

        e->ids[0] = '\0';
        for (size_t i = 0; i < q->n; i++) {
                size_t l = strlen(q->vals[i] ? q->vals[i] : "");

                if (strcmp(q->keys[i], "id") != 0 || !q->vals[i] || n + l + 2 > sizeof(e->ids))
                        continue;
                if (n)
                        e->ids[n++] = ',';
                memcpy(e->ids + n, q->vals[i], l + 1);
                n += l;
        }
}

void sim_log_request(struct sim *s, const struct sim_req *rq, unsigned status)
{
        const char *agent = sim_params_get(&rq->form, "agent_name");
        struct sim_log_entry *e;

        if (!agent)
                agent = sim_params_get(&rq->query, "agent_name");
        pthread_mutex_lock(&s->lock);
        count_rate(s);
        e = &s->log[s->log_count % SIM_LOG_SLOTS];
        snprintf(e->method, sizeof(e->method), "%s", rq->method);
        snprintf(e->path, sizeof(e->path), "%s", rq->path);
        snprintf(e->op, sizeof(e->op), "%s", rq->op ? rq->op : "");
        snprintf(e->user, sizeof(e->user), "%s", rq->user ? rq->user : "");
        snprintf(e->agent_name, sizeof(e->agent_name), "%s", agent ? agent : "");
        log_params(e->params, sizeof(e->params), &rq->form);
        log_ids(e, &rq->query);
        e->status = status;
        s->log_count++;
        if (strcmp(rq->method, "GET") == 0)
                s->reads++;
        else
                s->writes++;
        pthread_mutex_unlock(&s->lock);
}

/* --- faults ------------------------------------------------------------------------------- */

static unsigned jint(const cJSON *o, const char *k, unsigned dflt)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

        return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e9
                       ? (unsigned)v->valuedouble
                       : dflt;
}

static char *jop(const cJSON *o)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "op");

        return cJSON_IsString(v) ? xstrdup(v->valuestring) : NULL;
}

static void apply_rates(struct sim_faults *f, const cJSON *rates)
{
        const cJSON *e;

        cJSON_ArrayForEach (e, rates) {
                if (!cJSON_IsNumber(e))
                        continue;
                f->rates = xrealloc(f->rates, (f->n_rates + 1) * sizeof(*f->rates));
                f->rates[f->n_rates++] =
                        (struct sim_rate){ .op = xstrdup(e->string), .rate = e->valuedouble };
        }
}

static struct sim_machine *named(struct sim *s, const cJSON *e)
{
        return cJSON_IsString(e) ? sim_find_machine(s, e->valuestring) : NULL;
}

static void set_message(struct sim_machine *m, const char *msg)
{
        free(m->status_message);
        m->status_message = xstrdup(msg);
}

/* What an operator does in the MAAS UI, behind the provider's back (see the top). */
static void operator_actions(struct sim *s, const cJSON *doc)
{
        const cJSON *e;
        struct sim_machine *m;

        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "release"))
                if ((m = named(s, e)) != NULL) {
                        sim_machine_finish_release(m);
                        set_message(m, "Released by an operator");
                }
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "allocate_to"))
                if (cJSON_IsString(e) && (m = sim_find_machine(s, e->string)) != NULL) {
                        sim_machine_finish_release(m);
                        m->status = ST_ALLOCATED;
                        sim_set(&m->owner, e->valuestring);
                        set_message(m, "Allocated to another user");
                }
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "commission"))
                if ((m = named(s, e)) != NULL) {
                        sim_machine_finish_release(m);
                        sim_machine_reset_links(s, m); /* commissioning redoes the network */
                        m->status = ST_COMMISSIONING;  /* stays there: the operator's fix */
                        set_message(m, "Commissioning");
                }
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "mark_broken"))
                if ((m = named(s, e)) != NULL) {
                        m->status = ST_BROKEN;
                        set_message(m, "Marked broken by an operator");
                }
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "delete"))
                if ((m = named(s, e)) != NULL)
                        sim_remove_machine(s, m);
}

static void apply_lists(struct sim *s, const cJSON *doc)
{
        const cJSON *e;

        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "fail_deploy"))
                if (cJSON_IsString(e))
                        sim_strv_add(&s->faults.fail_deploy, e->valuestring);
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "bmc_unknown"))
                if (cJSON_IsString(e))
                        sim_strv_add(&s->faults.bmc_unknown, e->valuestring);
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "power_off")) {
                struct sim_machine *m =
                        cJSON_IsString(e) ? sim_find_machine(s, e->valuestring) : NULL;

                if (m)
                        sim_set(&m->power_state, "off"); /* behind the provider's back */
        }
        operator_actions(s, doc);
}

int sim_faults_apply(struct sim *s, const cJSON *doc, char **ret_err)
{
        struct sim_faults *f = &s->faults;
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(doc, "unavailable");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(doc, "fail_next");

        if (!cJSON_IsObject(doc)) {
                *ret_err = xstrdup("faults: a JSON object is required");
                return CM_EINVAL;
        }
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "clear")))
                sim_faults_release(f);
        apply_rates(f, cJSON_GetObjectItemCaseSensitive(doc, "error_rate"));
        f->error_status = jint(doc, "error_status", f->error_status ? f->error_status : 500);
        f->latency_ms = jint(doc, "latency_ms", f->latency_ms);
        f->compose_delay_ms = jint(doc, "compose_delay_ms", f->compose_delay_ms);
        if (cJSON_IsObject(u)) {
                f->unavailable = jint(u, "count", 1);
                f->retry_after = jint(u, "retry_after", 1);
                f->unavailable_status = jint(u, "status", 503) == 429 ? 429 : 503;
                free(f->unavailable_op);
                f->unavailable_op = jop(u);
        }
        if (cJSON_IsObject(n)) {
                f->fail_next = jint(n, "count", 1);
                f->fail_after = jint(n, "after", 0);
                f->fail_status = jint(n, "status", 500);
                free(f->fail_op);
                f->fail_op = jop(n);
        }
        apply_lists(s, doc);
        return 0;
}

/* --- endpoints ------------------------------------------------------------------------------ */

static cJSON *dup_or_null(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        return v ? cJSON_Duplicate(v, false) : cJSON_CreateNull();
}

/* [{interface, mode, ip_address, cidr}] of every link of m (the state dump's summary). */
static cJSON *links_json(const struct sim *s, const struct sim_machine *m)
{
        cJSON *arr = cJSON_CreateArray();

        for (size_t j = 0; j < m->n_ifaces; j++) {
                cJSON *f = sim_iface_json(s, m, &m->ifaces[j]);
                const cJSON *l;

                cJSON_ArrayForEach (l, cJSON_GetObjectItemCaseSensitive(f, "links")) {
                        cJSON *o = cJSON_CreateObject();

                        cJSON_AddStringToObject(o, "interface", m->ifaces[j].name);
                        cJSON_AddItemToObject(o, "mode", dup_or_null(l, "mode"));
                        cJSON_AddItemToObject(o, "ip_address", dup_or_null(l, "ip_address"));
                        cJSON_AddItemToObject(
                                o, "cidr",
                                dup_or_null(cJSON_GetObjectItemCaseSensitive(l, "subnet"), "cidr"));
                        cJSON_AddItemToArray(arr, o);
                }
                cJSON_Delete(f);
        }
        return arr;
}

/* The user reservations (ipaddresses.c): [{ip, owner, subnet, hostname}]. */
static cJSON *reservations_json(const struct sim *s)
{
        cJSON *rs = cJSON_CreateArray();

        for (size_t i = 0; i < s->n_reservations; i++) {
                const struct sim_reservation *r = &s->reservations[i];
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "ip", r->ip);
                cJSON_AddStringToObject(o, "owner", r->owner);
                cJSON_AddStringToObject(o, "subnet", s->subnets[r->subnet].cidr);
                cJSON_AddItemToObject(o, "hostname",
                                      r->hostname ? cJSON_CreateString(r->hostname)
                                                  : cJSON_CreateNull());
                cJSON_AddItemToArray(rs, o);
        }
        return rs;
}

static cJSON *state_json(struct sim *s)
{
        cJSON *doc = cJSON_CreateObject();
        cJSON *ms = cJSON_AddArrayToObject(doc, "machines");
        cJSON *dns = cJSON_AddArrayToObject(doc, "dnsresources");
        cJSON *all_tags;

        for (size_t i = 0; i < s->n_machines; i++) {
                struct sim_machine *m = &s->machines[i];
                cJSON *o = cJSON_CreateObject(), *tags;

                sim_machine_tick(s, m);
                cJSON_AddStringToObject(o, "system_id", m->system_id);
                cJSON_AddStringToObject(o, "hostname", m->hostname);
                cJSON_AddStringToObject(o, "status_name", sim_status_name(m->status));
                cJSON_AddStringToObject(o, "power_state", m->power_state);
                cJSON_AddItemToObject(o, "owner",
                                      m->owner ? cJSON_CreateString(m->owner) : cJSON_CreateNull());
                cJSON_AddItemToObject(o, "agent_name",
                                      m->agent_name ? cJSON_CreateString(m->agent_name)
                                                    : cJSON_CreateNull());
                cJSON_AddStringToObject(o, "zone", s->zones[m->zone].name);
                cJSON_AddStringToObject(o, "pool", s->pools[m->pool].name);
                cJSON_AddStringToObject(o, "osystem", m->osystem);
                cJSON_AddStringToObject(o, "distro_series", m->distro_series);
                cJSON_AddBoolToObject(o, "ephemeral_deploy", m->ephemeral);
                cJSON_AddItemToObject(o, "hwe_kernel",
                                      m->hwe_kernel ? cJSON_CreateString(m->hwe_kernel)
                                                    : cJSON_CreateNull());
                cJSON_AddItemToObject(o, "storage_layout",
                                      m->storage_layout ? cJSON_CreateString(m->storage_layout)
                                                        : cJSON_CreateNull());
                cJSON_AddItemToObject(o, "user_data",
                                      m->user_data ? cJSON_CreateString(m->user_data)
                                                   : cJSON_CreateNull());
                cJSON_AddItemToObject(o, "owner_data", cJSON_Duplicate(m->owner_data, true));
                tags = cJSON_AddArrayToObject(o, "tag_names");
                for (size_t t = 0; t < m->tags.n; t++)
                        cJSON_AddItemToArray(tags, cJSON_CreateString(m->tags.v[t]));
                cJSON_AddItemToObject(o, "disk_marker",
                                      m->disk_marker ? cJSON_CreateString(m->disk_marker)
                                                     : cJSON_CreateNull());
                cJSON_AddNumberToObject(o, "erasures", m->erasures);
                if (m->erase_mode)
                        cJSON_AddStringToObject(o, "erase_mode", m->erase_mode);
                cJSON_AddItemToObject(o, "ip_addresses", sim_machine_ips_json(m));
                cJSON_AddItemToObject(o, "links", links_json(s, m));
                cJSON_AddItemToObject(o, "default_gateways", sim_default_gateways_json(s, m));
                cJSON_AddItemToArray(ms, o);
        }
        for (size_t i = 0; i < s->n_dns; i++) {
                cJSON *o = cJSON_CreateObject();
                char *fqdn = xasprintf("%s.%s", s->dns[i].name, s->domains[s->dns[i].domain].name);
                cJSON *ips = cJSON_AddArrayToObject(o, "ips");

                cJSON_AddNumberToObject(o, "id", s->dns[i].id);
                cJSON_AddStringToObject(o, "fqdn", fqdn);
                for (size_t j = 0; j < s->dns[i].ips.n; j++)
                        cJSON_AddItemToArray(ips, cJSON_CreateString(s->dns[i].ips.v[j]));
                cJSON_AddItemToArray(dns, o);
                free(fqdn);
        }
        cJSON_AddItemToObject(doc, "reservations", reservations_json(s));
        all_tags = cJSON_AddArrayToObject(doc, "tags");
        for (size_t i = 0; i < s->n_tags; i++) {
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "name", s->tags[i].name);
                cJSON_AddStringToObject(o, "comment", s->tags[i].comment);
                cJSON_AddItemToArray(all_tags, o);
        }
        return doc;
}

static cJSON *requests_json(const struct sim *s)
{
        cJSON *doc = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(doc, "requests");
        uint64_t first = s->log_count > SIM_LOG_SLOTS ? s->log_count - SIM_LOG_SLOTS : 0;

        cJSON_AddNumberToObject(doc, "count", (double)s->log_count);
        cJSON_AddNumberToObject(doc, "reads", (double)s->reads);
        cJSON_AddNumberToObject(doc, "writes", (double)s->writes);
        cJSON_AddNumberToObject(doc, "peakRps", (double)s->peak_rps);
        for (uint64_t i = first; i < s->log_count; i++) {
                const struct sim_log_entry *e = &s->log[i % SIM_LOG_SLOTS];
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "method", e->method);
                cJSON_AddStringToObject(o, "path", e->path);
                cJSON_AddStringToObject(o, "op", e->op);
                cJSON_AddNumberToObject(o, "status", e->status);
                if (e->user[0])
                        cJSON_AddStringToObject(o, "user", e->user);
                if (e->agent_name[0])
                        cJSON_AddStringToObject(o, "agent_name", e->agent_name);
                if (e->params[0])
                        cJSON_AddStringToObject(o, "params", e->params);
                if (e->ids[0])
                        cJSON_AddStringToObject(o, "ids", e->ids);
                cJSON_AddItemToArray(arr, o);
        }
        return doc;
}

typedef int add_fn(struct sim *s, const cJSON *o, char **ret_err);

static int add_items(struct sim *s, const cJSON *doc, add_fn *fn, char **ret_err)
{
        const cJSON *e;
        int r;

        if (cJSON_IsObject(doc))
                return fn(s, doc, ret_err);
        if (!cJSON_IsArray(doc)) {
                *ret_err = xstrdup("a JSON object or array is required");
                return CM_EINVAL;
        }
        cJSON_ArrayForEach (e, doc) {
                r = fn(s, e, ret_err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* POST /_sim/keys {"add": "CK:TK:TS", "user": "admin"} accepts one more API key (of user
 * admin unless another of the sim's users is named); {"revoke": "CK"} refuses the key of
 * that consumer key from now on (401). A key rotation in MAAS: add the new key, move the
 * clients over, revoke the old one. Lock held. */
static int keys_apply(struct sim *s, const cJSON *doc, char **ret_err)
{
        static const char *const users[] = { "admin", "user2", "user3", "user4" };
        const char *add = json_find_str(doc, "add", NULL);
        const char *revoke = json_find_str(doc, "revoke", NULL);
        const char *user = json_find_str(doc, "user", NULL);
        const char *a, *b;
        struct sim_key *k;

        if (revoke) {
                for (size_t i = 0; i < s->n_keys; i++) {
                        if (strcmp(s->keys[i].consumer, revoke) != 0)
                                continue;
                        free(s->keys[i].consumer);
                        free(s->keys[i].token);
                        free(s->keys[i].secret);
                        s->keys[i] = s->keys[--s->n_keys];
                        return 0;
                }
                *ret_err = xasprintf("no key of consumer %s", revoke);
                return CM_ENOTFOUND;
        }
        a = add ? strchr(add, ':') : NULL;
        b = a ? strchr(a + 1, ':') : NULL;
        if (!add || !a || !b || a == add || b == a + 1 || !b[1] || strchr(b + 1, ':')) {
                *ret_err = xstrdup("add: CK:TK:TS is required (or revoke: CK)");
                return CM_EINVAL;
        }
        if (s->n_keys == SIM_MAX_KEYS) {
                *ret_err = xstrdup("too many keys");
                return CM_EINVAL;
        }
        k = &s->keys[s->n_keys];
        k->user = NULL;
        for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++)
                if (strcmp(user ? user : "admin", users[i]) == 0)
                        k->user = users[i];
        if (!k->user) {
                *ret_err = xstrdup("user: admin, user2, user3 or user4");
                return CM_EINVAL;
        }
        k->consumer = xstrndup(add, (size_t)(a - add));
        k->token = xstrndup(a + 1, (size_t)(b - a - 1));
        k->secret = xstrdup(b + 1);
        s->n_keys++;
        return 0;
}

/* POST endpoints taking a JSON body; lock held. */
static int admin_post(struct sim *s, const char *path, const cJSON *doc, char **ret_err)
{
        if (strcmp(path, "/_sim/faults") == 0)
                return sim_faults_apply(s, doc, ret_err);
        if (strcmp(path, "/_sim/machines") == 0)
                return add_items(s, doc, sim_add_machine_json, ret_err);
        if (strcmp(path, "/_sim/pools") == 0)
                return add_items(s, doc, sim_add_pool_json, ret_err);
        if (strcmp(path, "/_sim/subnets") == 0)
                return add_items(s, doc, sim_add_subnet_json, ret_err);
        if (strcmp(path, "/_sim/pods") == 0)
                return add_items(s, doc, sim_add_pod_json, ret_err);
        if (strcmp(path, "/_sim/kubelets") == 0)
                return sim_kubelets_apply(s, doc, ret_err);
        if (strcmp(path, "/_sim/keys") == 0)
                return keys_apply(s, doc, ret_err);
        *ret_err = xasprintf("unknown admin endpoint %s", path);
        return CM_ENOTFOUND;
}

static void admin_locked(struct sim *s,
                         const char *method,
                         const char *path,
                         const char *body,
                         size_t body_len,
                         struct sim_resp *rp)
{
        bool get = strcmp(method, "GET") == 0;
        cJSON *doc;
        char *err = NULL;
        int r;

        if (get && strcmp(path, "/_sim/state") == 0) {
                sim_reply_json(rp, state_json(s));
        } else if (get && strcmp(path, "/_sim/requests") == 0) {
                sim_reply_json(rp, requests_json(s));
        } else if (get && strcmp(path, "/_sim/pods") == 0) {
                sim_reply_json(rp, sim_pods_json(s));
        } else if (get && strcmp(path, "/_sim/kubelets") == 0) {
                sim_reply_json(rp, sim_kubelets_json(s));
        } else if (strcmp(method, "POST") == 0 && strcmp(path, "/_sim/reset-log") == 0) {
                s->log_count = 0;
                s->reads = s->writes = 0;
                s->rate_count = s->peak_rps = 0;
                sim_reply_text(rp, 200, "ok\n");
        } else if (strcmp(method, "POST") == 0) {
                doc = cJSON_ParseWithLengthOpts(body, body_len, NULL, false);
                r = doc ? admin_post(s, path, doc, &err) : CM_EPARSE;
                if (r < 0)
                        sim_reply_text(rp, r == CM_ENOTFOUND ? 404 : 400, "%s\n",
                                       err ? err : "malformed JSON");
                else
                        sim_reply_text(rp, 200, "ok\n");
                cJSON_Delete(doc);
                free(err);
        } else {
                sim_reply_text(rp, 404, "unknown admin endpoint %s %s\n", method, path);
        }
}

void sim_admin(struct sim *s,
               const char *method,
               const char *path,
               const char *body,
               size_t body_len,
               struct sim_resp *rp)
{
        pthread_mutex_lock(&s->lock);
        admin_locked(s, method, path, body, body_len, rp);
        pthread_mutex_unlock(&s->lock);
}
