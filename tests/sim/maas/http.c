/*
 * maas-sim HTTP: the MAAS region's request pipeline. Routing under /MAAS/api/2.0/ with
 * trailing slashes and /op-<name> twins, OAuth 1.0a verification (PLAINTEXT checked exactly;
 * HMAC-SHA1 accepted on consumer and token keys only, a documented test leniency), op
 * dispatch (query, then form, then path), fault injection and the response helpers.
 * sim_handle() takes sim.lock around the handler; handlers never block.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

struct sim_route {
        const char *pattern; /* relative to /MAAS/api/2.0/; '*' = one segment */
        const char *name;    /* fault/log key prefix */
        const struct sim_op *ops;
        bool anonymous;
};

static const struct sim_route routes[] = {
        { "version/", "version", sim_ops_version, true },
        { "users/", "users", sim_ops_users, false },
        { "zones/", "zones", sim_ops_zones, false },
        { "zones/*/", "zone", sim_ops_zone, false },
        { "resourcepools/", "pools", sim_ops_pools, false },
        /* emulator-only alias: gomaasapi's Controller.Pools() asks for pools/ */
        { "pools/", "pools", sim_ops_pools, false },
        { "resourcepool/*/", "pool", sim_ops_pool, false },
        { "tags/", "tags", sim_ops_tags, false },
        { "tags/*/", "tag", sim_ops_tag, false },
        { "domains/", "domains", sim_ops_domains, false },
        { "domains/*/", "domain", sim_ops_domain, false },
        { "boot-resources/", "boot-resources", sim_ops_boots, false },
        { "boot-resources/*/", "boot-resource", sim_ops_boot, false },
        { "machines/", "machines", sim_ops_machines, false },
        { "machines/*/", "machine", sim_ops_machine, false },
        { "dnsresources/", "dnsresources", sim_ops_dnsresources, false },
        { "dnsresources/*/", "dnsresource", sim_ops_dnsresource, false },
        { "subnets/", "subnets", sim_ops_subnets, false },
        { "subnets/*/", "subnet", sim_ops_subnet, false },
        { "nodes/*/interfaces/", "interfaces", sim_ops_interfaces, false },
        { "pods/", "pods", sim_ops_pods, false },
        { "pods/*/", "pod", sim_ops_pod, false },
        { "vm-hosts/", "pods", sim_ops_pods, false },
        { "vm-hosts/*/", "pod", sim_ops_pod, false },
        { "nodes/*/interfaces/*/", "interface", sim_ops_interface, false },
        { "ipaddresses/", "ipaddresses", sim_ops_ipaddresses, false },
        { "ipranges/", "ipranges", sim_ops_ipranges, false },
};

/* --- responses ----------------------------------------------------------------------------- */

void sim_reply_json(struct sim_resp *rp, cJSON *doc)
{
        rp->status = 200;
        rp->ctype = "application/json; charset=utf-8";
        rp->body = cJSON_PrintUnformatted(doc);
        cJSON_Delete(doc);
}

void sim_reply_raw(struct sim_resp *rp, struct buf *array)
{
        rp->status = 200;
        rp->ctype = "application/json; charset=utf-8";
        if (array->len == 0 && buf_append_str(array, "[") < 0)
                abort();
        if (buf_append_str(array, "]") < 0)
                abort();
        rp->body = buf_take(array, NULL);
}

void sim_reply_text(struct sim_resp *rp, unsigned status, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        free(rp->body);
        rp->body = xvasprintf(fmt, ap);
        va_end(ap);
        rp->status = status;
        rp->ctype = "text/plain; charset=utf-8";
}

void sim_reply_field_error(struct sim_resp *rp, const char *field, const char *fmt, ...)
{
        cJSON *doc = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(doc, field);
        va_list ap;
        char *msg;

        va_start(ap, fmt);
        msg = xvasprintf(fmt, ap);
        va_end(ap);
        cJSON_AddItemToArray(arr, cJSON_CreateString(msg));
        free(msg);
        free(rp->body);
        sim_reply_json(rp, doc);
        rp->status = 400;
}

void sim_reply_bad_op(struct sim_resp *rp, const struct sim_req *rq)
{
        sim_reply_text(rp, 400, "Unrecognised signature: method=%s op=%s", rq->method,
                       rq->op ? rq->op : "None");
}

/* --- OAuth --------------------------------------------------------------------------------- */

struct oauth_fields {
        char *ck, *tk, *sig, *method, *ts, *nonce, *version;
};

static void oauth_release(struct oauth_fields *f)
{
        free(f->ck);
        free(f->tk);
        free(f->sig);
        free(f->method);
        free(f->ts);
        free(f->nonce);
        free(f->version);
}

static int hexdigit(char c)
{
        static const char digits[] = "0123456789abcdef";
        const char *p = c ? strchr(digits, c | 0x20) : NULL;

        return p ? (int)(p - digits) : -1;
}

static char *pct_decode(const char *s, size_t n)
{
        char *d = xmalloc(n + 1);
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                int hi = i + 2 < n ? hexdigit(s[i + 1]) : -1;
                int lo = i + 2 < n ? hexdigit(s[i + 2]) : -1;

                if (s[i] == '%' && hi >= 0 && lo >= 0) {
                        d[o++] = (char)(hi * 16 + lo);
                        i += 2;
                } else {
                        d[o++] = s[i];
                }
        }
        d[o] = '\0';
        return d;
}

static void oauth_item(struct oauth_fields *f, const char *item, size_t n)
{
        struct {
                const char *key;
                char **dst;
        } map[] = {
                { "oauth_consumer_key", &f->ck }, { "oauth_token", &f->tk },
                { "oauth_signature", &f->sig },   { "oauth_signature_method", &f->method },
                { "oauth_timestamp", &f->ts },    { "oauth_nonce", &f->nonce },
                { "oauth_version", &f->version },
        };

        const char *eq = memchr(item, '=', n);
        const char *v;
        size_t kl, vl;

        while (n > 0 && (*item == ' ' || *item == '\t')) {
                item++;
                n--;
        }
        eq = memchr(item, '=', n);
        if (!eq)
                return;
        kl = (size_t)(eq - item);
        v = eq + 1;
        vl = n - kl - 1;
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
                vl--;
        if (vl >= 2 && v[0] == '"' && v[vl - 1] == '"') {
                v++;
                vl -= 2;
        }
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (strlen(map[i].key) == kl && strncmp(map[i].key, item, kl) == 0) {
                        free(*map[i].dst);
                        *map[i].dst = pct_decode(v, vl);
                }
}

static void oauth_parse(const char *h, struct oauth_fields *f)
{
        const char *end;

        while (*h == ' ')
                h++;
        if (strncasecmp(h, "OAuth", 5) != 0)
                return;
        h += 5;
        while (*h) {
                end = strchr(h, ',');
                if (!end)
                        end = h + strlen(h);
                oauth_item(f, h, (size_t)(end - h));
                h = *end ? end + 1 : end;
        }
}

static bool is_integer(const char *s)
{
        if (!s || !*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

static const struct sim_key *find_key(const struct sim *s, const char *ck)
{
        for (size_t i = 0; i < s->n_keys; i++)
                if (strcmp(s->keys[i].consumer, ck) == 0)
                        return &s->keys[i];
        return NULL;
}

static bool oauth_signature_ok(const struct oauth_fields *f, const struct sim_key *k)
{
        char *want;
        bool ok;

        if (strcmp(f->method, "HMAC-SHA1") == 0)
                return true; /* test leniency: keys checked, signature not (maas-api.md §2) */
        if (strcmp(f->method, "PLAINTEXT") != 0)
                return false;
        want = xasprintf("&%s", k->secret);
        ok = strcmp(f->sig, want) == 0;
        free(want);
        return ok;
}

/* 0 and *ret_user on success; otherwise fills rp (401/400). */
static int oauth_verify(const struct sim *s,
                        const char *auth,
                        const char **ret_user,
                        struct sim_resp *rp)
{
        struct oauth_fields f = { 0 };
        const struct sim_key *k;
        int r = CM_EUNAUTHORIZED;

        if (auth)
                oauth_parse(auth, &f);
        if (!f.ck || !f.tk || !f.sig || !f.method || !f.ts || !f.nonce) {
                sim_reply_text(rp, 401, "Authorization Error: 'Missing OAuth credentials.'");
        } else if (!is_integer(f.ts)) {
                sim_reply_text(rp, 400, "Invalid timestamp: %s", f.ts);
                r = CM_EINVAL;
        } else if (f.version && strcmp(f.version, "1.0") != 0) {
                sim_reply_text(rp, 401, "Authorization Error: 'OAuth version %s not supported.'",
                               f.version);
        } else if (!(k = find_key(s, f.ck))) {
                sim_reply_text(rp, 401, "Authorization Error: Invalid API key.");
        } else if (strcmp(k->token, f.tk) != 0) {
                sim_reply_text(rp, 401, "Authorization Error: 'Invalid access token: %s'", f.tk);
        } else if (!oauth_signature_ok(&f, k)) {
                sim_reply_text(rp, 401, "Authorization Error: 'Invalid signature.'");
        } else {
                *ret_user = k->user;
                r = 0;
        }
        oauth_release(&f);
        return r;
}

/* --- routing ------------------------------------------------------------------------------- */

/* Matches rel against pattern; each '*' segment is copied into args[i] (size argsz). */
static bool route_match(
        const char *pattern, const char *rel, size_t rel_len, char (*args)[256], size_t max_args)
{
        const char *p = pattern, *r = rel, *end = rel + rel_len;
        size_t n_args = 0;

        while (*p && r < end) {
                if (*p == '*') {
                        const char *slash = memchr(r, '/', (size_t)(end - r));
                        size_t n = slash ? (size_t)(slash - r) : 0;

                        if (!slash || n == 0 || n >= sizeof(args[0]) || n_args == max_args)
                                return false;
                        memcpy(args[n_args], r, n);
                        args[n_args++][n] = '\0';
                        r = slash;
                        p++;
                        continue;
                }
                if (*p != *r)
                        return false;
                p++;
                r++;
        }
        return *p == '\0' && r == end;
}

static const struct sim_route *route_find(const char *rel, char (*args)[256], char **ret_path_op)
{
        const char *last = strrchr(rel, '/');
        size_t len = strlen(rel);

        *ret_path_op = NULL;
        /* /op-<name> twin: ".../op-power_on" selects op power_on on ".../" */
        if (last && strncmp(last + 1, "op-", 3) == 0 && last[4] != '\0') {
                *ret_path_op = xstrdup(last + 4);
                len = (size_t)(last - rel) + 1;
        }
        for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
                if (route_match(routes[i].pattern, rel, len, args, 2))
                        return &routes[i];
        free(*ret_path_op);
        *ret_path_op = NULL;
        return NULL;
}

static const char *crud_name(const char *method)
{
        static const char *const map[][2] = {
                { "GET", "read" }, { "POST", "create" }, { "PUT", "update" }, { "DELETE", "delete" }
        };

        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (strcmp(map[i][0], method) == 0)
                        return map[i][1];
        return "other";
}

static const struct sim_op *op_find(const struct sim_op *ops, const char *method, const char *op)
{
        for (; ops->method; ops++) {
                if (strcmp(ops->method, method) != 0)
                        continue;
                if ((!op && !ops->op) || (op && ops->op && strcmp(op, ops->op) == 0))
                        return ops;
        }
        return NULL;
}

static const char *nonempty(const char *s)
{
        return s && *s ? s : NULL;
}

/* Runs the handler (lock held), after auth and fault injection. */
static void dispatch(struct sim *s,
                     const struct sim_route *rt,
                     struct sim_req *rq,
                     struct sim_resp *rp)
{
        char *opkey = xasprintf("%s.%s", rt->name, rq->op ? rq->op : crud_name(rq->method));
        const struct sim_op *op = op_find(rt->ops, rq->method, rq->op);
        unsigned st, retry = 0;

        pthread_mutex_lock(&s->lock);
        st = sim_fault_pick(s, opkey, &retry);
        if (st) {
                sim_reply_text(rp, st, "Injected fault (maas-sim) for %s", opkey);
                rp->retry_after = retry;
        } else if (!op) {
                sim_reply_bad_op(rp, rq);
        } else {
                op->fn(s, rq, rp);
        }
        pthread_mutex_unlock(&s->lock);
        free(opkey);
}

void sim_handle(struct sim *s, struct sim_req *rq, const char *auth, struct sim_resp *rp)
{
        const struct sim_route *rt = NULL;
        char args[2][256];
        char *path_op = NULL;
        const char *star;

        if (strncmp(rq->path, "/MAAS/api/1.0/", 14) == 0) {
                sim_reply_text(rp, 410, "The 1.0 API is no longer available.");
                goto out;
        }
        if (strncmp(rq->path, SIM_API_PREFIX, strlen(SIM_API_PREFIX)) == 0)
                rt = route_find(rq->path + strlen(SIM_API_PREFIX), args, &path_op);
        if (!rt) {
                sim_reply_text(rp, 404, "Unknown API endpoint: %s.", rq->path);
                goto out;
        }
        star = strchr(rt->pattern, '*');
        rq->arg = star ? args[0] : NULL;
        rq->arg2 = star && strchr(star + 1, '*') ? args[1] : NULL;
        rq->op = nonempty(sim_params_get(&rq->query, "op"));
        if (!rq->op)
                rq->op = nonempty(sim_params_get(&rq->form, "op"));
        if (!rq->op)
                rq->op = path_op;
        if (rt->anonymous) {
                dispatch(s, rt, rq, rp);
        } else {
                int v;

                pthread_mutex_lock(&s->lock); /* the keys change through /_sim/keys */
                v = oauth_verify(s, auth, &rq->user, rp);
                pthread_mutex_unlock(&s->lock);
                if (v == 0)
                        dispatch(s, rt, rq, rp);
        }
out:
        sim_log_request(s, rq, rp->status);
        free(path_op);
}
