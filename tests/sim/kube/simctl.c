/*
 * kube-sim control endpoints for tests (bearer token required like every API path):
 *   GET    /_sim/requests          request log {"items":[{method,path,query,contentType,
 *                                   userAgent,status}]}, oldest first, at most 2000
 *                                   plus "counts": {"<agent> <METHOD> events|objects": n}
 *                                   over every request, never capped (<agent> = the
 *                                   User-Agent up to its first '/'), and "access":
 *                                   {"<agent> <verb> <group> <resource[/sub]> <ns>": n}, the
 *                                   RBAC attributes of every request (ns "" = cluster-wide,
 *                                   group "-" and resource = path for non-resource URLs),
 *                                   never capped
 *   DELETE /_sim/requests          clears the log and the counts
 *   GET    /_sim/faults            current faults
 *   POST   /_sim/faults            {"delayMs":N,"errorRate":0..1,"errorCode":429|500,
 *                                   "expireNextWatch":bool,"dropWatches":bool,
 *                                   "failNext":{"method":M,"pathContains":S,"count":N}}
 * /_sim paths are never delayed, failed or logged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "ks.h"
#include "xalloc.h"

#define REQLOG_MAX 2000

static enum MHD_Result add_arg(void *cls,
                               enum MHD_ValueKind kind,
                               const char *key,
                               const char *value)
{
        (void)kind;
        cJSON_AddStringToObject(cls, key, value ? value : "");
        return MHD_YES;
}

/* Called with ks.mu held: adds one to (*tally)[key], creating the object when needed. */
static void tally_add(cJSON **tally, const char *key)
{
        cJSON *c;

        if (!*tally)
                *tally = cJSON_CreateObject();
        c = cJSON_GetObjectItemCaseSensitive(*tally, key);
        if (c)
                cJSON_SetNumberValue(c, c->valuedouble + 1);
        else
                cJSON_AddNumberToObject(*tally, key, 1);
}

/* The path's non-empty '/'-separated segments, up to max; returns how many. Segments point
 * into buf, a copy of the path cut at each '/'. */
static size_t split_path(const char *path, char *buf, size_t cap, char **seg, size_t max)
{
        size_t n = 0;
        char *p = buf;

        (void)snprintf(buf, cap, "%s", path);
        while (*p && n < max) {
                char *slash = strchr(p, '/');

                if (slash)
                        *slash = '\0';
                if (*p)
                        seg[n++] = p;
                if (!slash)
                        break;
                p = slash + 1;
        }
        return n;
}

/* The verb an authorizer sees for this request, as kube-apiserver's RequestInfo derives it. */
static const char *rbac_verb(const struct kreq *r, bool named)
{
        if (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD"))
                return named ? "get" : kq_bool(r, "watch") ? "watch" : "list";
        if (!strcmp(r->method, "POST"))
                return "create";
        if (!strcmp(r->method, "PUT"))
                return "update";
        if (!strcmp(r->method, "PATCH"))
                return "patch";
        if (!strcmp(r->method, "DELETE"))
                return named ? "delete" : "deletecollection";
        return r->method;
}

/* "<verb> <group> <resource[/sub]> <namespace>" for a resource path, or
 * "<verb> - <path> " for a non-resource URL. */
static void rbac_attributes(const struct kreq *r, char *out, size_t cap)
{
        char buf[512], *seg[8];
        size_t n = split_path(r->path, buf, sizeof(buf), seg, ARRAY_SIZE(seg)), i;
        const char *group, *ns = "", *res, *name = NULL, *sub = NULL;

        if (n >= 3 && !strcmp(seg[0], "api")) {
                group = "";
                i = 2;
        } else if (n >= 4 && !strcmp(seg[0], "apis")) {
                group = seg[1];
                i = 3;
        } else {
                goto nonresource;
        }
        if (!strcmp(seg[i], "namespaces") && i + 2 < n) {
                ns = seg[i + 1];
                i += 2;
        }
        res = seg[i];
        if (i + 1 < n)
                name = seg[i + 1];
        if (i + 2 < n)
                sub = seg[i + 2];
        (void)snprintf(out, cap, "%s %s %s%s%s %s", rbac_verb(r, name != NULL), group, res,
                       sub ? "/" : "", sub ? sub : "", ns);
        return;
nonresource:
        (void)snprintf(out, cap, "%s - %s ", !strcmp(r->method, "GET") ? "get" : "create", r->path);
}

static void count_request(const struct kreq *r)
{
        const char *ua = r->user_agent ? r->user_agent : "";
        int n = (int)strcspn(ua, "/ ");
        char key[96], attrs[512], access[640];

        if (n > 64)
                n = 64;
        (void)snprintf(key, sizeof(key), "%.*s %s %s", n, ua, r->method,
                       strstr(r->path, "/events") ? "events" : "objects");
        rbac_attributes(r, attrs, sizeof(attrs));
        (void)snprintf(access, sizeof(access), "%.*s %s", n, ua, attrs);
        pthread_mutex_lock(&ks.mu);
        tally_add(&ks.counts, key);
        tally_add(&ks.access, access);
        pthread_mutex_unlock(&ks.mu);
}

void simctl_log(const struct kreq *r, unsigned status)
{
        cJSON *e;

        if (!strncmp(r->path, "/_sim/", 6))
                return;
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "method", r->method);
        cJSON_AddStringToObject(e, "path", r->path);
        MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_arg,
                                  cJSON_AddObjectToObject(e, "query"));
        cJSON_AddStringToObject(e, "contentType", r->content_type ? r->content_type : "");
        cJSON_AddStringToObject(e, "userAgent", r->user_agent ? r->user_agent : "");
        cJSON_AddNumberToObject(e, "status", status ? status : 200);
        count_request(r);
        pthread_mutex_lock(&ks.mu);
        cJSON_AddItemToArray(ks.reqlog, e);
        if (++ks.reqlog_n > REQLOG_MAX) {
                cJSON_DeleteItemFromArray(ks.reqlog, 0);
                ks.reqlog_n--;
        }
        pthread_mutex_unlock(&ks.mu);
}

/* Called with ks.mu held. */
static bool targeted(const struct kreq *r)
{
        return ks.faults.fail_count > 0 && strcmp(r->method, ks.faults.fail_method) == 0 &&
               strstr(r->path, ks.faults.fail_path) != NULL;
}

static void set_fail_next(const cJSON *x)
{
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(x, "method");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(x, "pathContains");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(x, "count");

        if (!cJSON_IsString(m) || !cJSON_IsString(p) ||
            strlen(m->valuestring) >= sizeof(ks.faults.fail_method) ||
            strlen(p->valuestring) >= sizeof(ks.faults.fail_path))
                return;
        memcpy(ks.faults.fail_method, m->valuestring, strlen(m->valuestring) + 1);
        memcpy(ks.faults.fail_path, p->valuestring, strlen(p->valuestring) + 1);
        ks.faults.fail_count = cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble < 1000
                                       ? (unsigned)n->valuedouble
                                       : 1;
}

bool simctl_fault(const struct kreq *r, struct kresp *resp)
{
        struct kfaults f;
        double roll;

        if (!strncmp(r->path, "/_sim/", 6))
                return false;
        pthread_mutex_lock(&ks.mu);
        f = ks.faults;
        if (targeted(r)) {
                ks.faults.fail_count--;
                pthread_mutex_unlock(&ks.mu);
                kresp_status(resp, 500, "InternalError", NULL,
                             "Internal error occurred: injected one-shot fault");
                return true;
        }
        pthread_mutex_unlock(&ks.mu);
        if (f.delay_ms) {
                struct timespec ts = { .tv_sec = f.delay_ms / 1000,
                                       .tv_nsec = (long)(f.delay_ms % 1000) * 1000000L };

                nanosleep(&ts, NULL);
        }
        if (f.error_rate <= 0)
                return false;
        roll = (double)(ks_random() % 1000000u) / 1000000.0;
        if (roll >= f.error_rate)
                return false;
        if (f.error_code == 429) {
                cJSON *d = cJSON_CreateObject();

                cJSON_AddNumberToObject(d, "retryAfterSeconds", 1);
                kresp_status(resp, 429, "TooManyRequests", d,
                             "Too many requests, please try again later.");
        } else {
                kresp_status(resp, f.error_code ? f.error_code : 500, "InternalError", NULL,
                             "Internal error occurred: injected fault");
        }
        return true;
}

static cJSON *faults_json(void)
{
        cJSON *o = cJSON_CreateObject();

        cJSON_AddNumberToObject(o, "delayMs", ks.faults.delay_ms);
        cJSON_AddNumberToObject(o, "errorRate", ks.faults.error_rate);
        cJSON_AddNumberToObject(o, "errorCode", ks.faults.error_code);
        cJSON_AddBoolToObject(o, "expireNextWatch", ks.faults.expire_next_watch);
        cJSON_AddNumberToObject(o, "failNextCount", ks.faults.fail_count);
        return o;
}

static void set_faults(const cJSON *b)
{
        const cJSON *x;

        x = cJSON_GetObjectItemCaseSensitive(b, "delayMs");
        if (cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble < 600000)
                ks.faults.delay_ms = (unsigned)x->valuedouble;
        x = cJSON_GetObjectItemCaseSensitive(b, "errorRate");
        if (cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 1)
                ks.faults.error_rate = x->valuedouble;
        x = cJSON_GetObjectItemCaseSensitive(b, "errorCode");
        if (cJSON_IsNumber(x) && x->valuedouble >= 400 && x->valuedouble < 600)
                ks.faults.error_code = (unsigned)x->valuedouble;
        x = cJSON_GetObjectItemCaseSensitive(b, "expireNextWatch");
        if (cJSON_IsBool(x))
                ks.faults.expire_next_watch = cJSON_IsTrue(x);
        x = cJSON_GetObjectItemCaseSensitive(b, "failNext");
        if (cJSON_IsObject(x))
                set_fail_next(x);
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "dropWatches"))) {
                ks.faults.drop_epoch++;
                store_wake_all();
        }
}

static bool faults(const struct kreq *r, struct kresp *resp)
{
        cJSON *b = NULL;

        if (!strcmp(r->method, "POST")) {
                b = ks_parse_body(r->body, r->body_len);
                if (!cJSON_IsObject(b)) {
                        cJSON_Delete(b);
                        kresp_status(resp, 400, "BadRequest", NULL, "body must be an object");
                        return true;
                }
        }
        pthread_mutex_lock(&ks.mu);
        if (b)
                set_faults(b);
        kresp_json(resp, 200, faults_json());
        pthread_mutex_unlock(&ks.mu);
        cJSON_Delete(b);
        return true;
}

static bool requests(const struct kreq *r, struct kresp *resp)
{
        cJSON *out = cJSON_CreateObject();

        pthread_mutex_lock(&ks.mu);
        if (!strcmp(r->method, "DELETE")) {
                cJSON_Delete(ks.reqlog);
                ks.reqlog = cJSON_CreateArray();
                ks.reqlog_n = 0;
                cJSON_Delete(ks.counts);
                ks.counts = NULL;
                cJSON_Delete(ks.access);
                ks.access = NULL;
        }
        cJSON_AddItemToObject(out, "items", cJSON_Duplicate(ks.reqlog, true));
        cJSON_AddItemToObject(out, "counts",
                              ks.counts ? cJSON_Duplicate(ks.counts, true) : cJSON_CreateObject());
        cJSON_AddItemToObject(out, "access",
                              ks.access ? cJSON_Duplicate(ks.access, true) : cJSON_CreateObject());
        pthread_mutex_unlock(&ks.mu);
        kresp_json(resp, 200, out);
        return true;
}

bool simctl_handle(const struct kreq *r, struct kresp *resp)
{
        if (!strcmp(r->path, "/_sim/faults"))
                return faults(r, resp);
        if (!strcmp(r->path, "/_sim/requests"))
                return requests(r, resp);
        return false;
}
