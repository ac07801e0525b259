/*
 * kube-sim control endpoints for tests (bearer token required like every API path):
 *   GET    /_sim/requests          request log {"items":[{method,path,query,contentType,
 *                                   userAgent,status}]}, oldest first, at most 2000
 *                                   plus "counts": {"<agent> <METHOD> events|objects": n}
 *                                   over every request, never capped (<agent> = the
 *                                   User-Agent up to its first '/')
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

static void count_request(const struct kreq *r)
{
        const char *ua = r->user_agent ? r->user_agent : "";
        size_t n = strcspn(ua, "/ ");
        char key[96];
        cJSON *c;

        (void)snprintf(key, sizeof(key), "%.*s %s %s", (int)(n < 64 ? n : 64), ua, r->method,
                       strstr(r->path, "/events") ? "events" : "objects");
        pthread_mutex_lock(&ks.mu);
        if (!ks.counts)
                ks.counts = cJSON_CreateObject();
        c = cJSON_GetObjectItemCaseSensitive(ks.counts, key);
        if (c)
                cJSON_SetNumberValue(c, c->valuedouble + 1);
        else
                cJSON_AddNumberToObject(ks.counts, key, 1);
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
        if (cJSON_GetArraySize(ks.reqlog) > REQLOG_MAX)
                cJSON_DeleteItemFromArray(ks.reqlog, 0);
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
                pthread_cond_broadcast(&ks.cond);
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
                cJSON_Delete(ks.counts);
                ks.counts = NULL;
        }
        cJSON_AddItemToObject(out, "items", cJSON_Duplicate(ks.reqlog, true));
        cJSON_AddItemToObject(out, "counts",
                              ks.counts ? cJSON_Duplicate(ks.counts, true) : cJSON_CreateObject());
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
