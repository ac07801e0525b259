#pragma once
/*
 * reconcile_world: what the reconciler unit tests run the real reconcilers in. Included by
 * tests/unit/reconcile/test_*.c only (every function is static).
 *
 *   - a fake MAAS: a struct http_transport behind the real maas_client. It answers from
 *     routes (method + the end of the URL -> status, body, Retry-After, or a transport
 *     error), the newest route first, and records every request with its form body
 *     URL-decoded ("op=deploy&user_data=...").
 *   - a fake Kubernetes API: a struct http_transport behind the real kube_client (the
 *     management cluster and the workload clusters, told apart by host). It holds objects
 *     by URL, answers GET from them, applies merge PATCHes (bumping resourceVersion;
 *     an object being deleted whose last finalizer goes is removed, as the API server does)
 *     and records every request.
 *   - a provider with its informers created but not started (provider_internal.h), and
 *     one worker (worker.h) whose clients use the two fakes; MAAS retry waits are recorded,
 *     never slept. Objects reach the informers through informer_feed_event
 *     (kube/informer_priv.h); world_sync() re-feeds what the fake API holds after a pass,
 *     as a watch would.
 *
 * Single-threaded: everything runs on the test's thread, on a fake clock.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../kube/informer_priv.h"
#include "../../../reconcile/provider_internal.h"
#include "../../../reconcile/reconciler.h"
#include "../../../reconcile/worker.h"
#include "base64.h"
#include "clock.h"
#include "err.h"
#include "json.h"
#include "patch_helper.h"
#include "testutil.h"
#include "xalloc.h"

#define MGMT      "https://mgmt.test"
#define WORKLOAD  "https://workload.test:6443"
#define MAAS_URL  "http://maas.test:5240/MAAS"
#define NS        "ns1"
#define INFRA_API MGMT "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/" NS
#define CAPI_API  MGMT "/apis/cluster.x-k8s.io/v1beta1/namespaces/" NS
#define CORE_API  MGMT "/api/v1/namespaces/" NS
#define WALL_S    1700000000

/* --- a recording transport ------------------------------------------------------------ */

struct fake_request {
        char *method;
        char *path; /* MAAS: after "api/2.0/"; Kubernetes: the whole URL */
        char *body; /* MAAS: URL-decoded form; Kubernetes: the JSON sent */
};

struct fake_route {
        char *method, *url_part;
        long status;
        char *body;
        long retry_after_s; /* -1 = none */
        int fail;           /* a transport error (CM_ETIMEDOUT) instead of an answer */
        unsigned times;     /* answers this many requests, then steps aside; 0 = all */
        unsigned hits;
};

struct fake_object {
        char *url;
        cJSON *obj;
        struct informer *inf; /* the informer that watches it, or NULL */
        bool gone;            /* deleted; world_sync tells the informer once */
};

struct fake_http {
        struct http_transport t;
        bool maas; /* routes + form bodies; else the object store */
        struct fake_route routes[64];
        size_t n_routes;
        struct fake_request reqs[256];
        size_t n_reqs;
        struct fake_object objs[32];
        size_t n_objs;
        unsigned rv;
        const char *refuse; /* URLs starting with this get 401 (no retry, no sleep) */
};

static char *url_decode(const char *s, size_t n)
{
        char *o = xmalloc(n + 1);
        size_t k = 0;

        for (size_t i = 0; i < n; i++) {
                unsigned v;

                if (s[i] == '+')
                        o[k++] = ' ';
                else if (s[i] == '%' && i + 2 < n && sscanf(s + i + 1, "%2x", &v) == 1) {
                        o[k++] = (char)v;
                        i += 2;
                } else
                        o[k++] = s[i];
        }
        o[k] = '\0';
        return o;
}

static void answer(struct transport_response *resp, long status, const char *body, long ra)
{
        resp->status = status;
        resp->body = xstrdup(body ? body : "");
        resp->body_len = strlen(resp->body);
        resp->content_type = xstrdup("application/json");
        resp->retry_after_s = ra;
}

static int maas_send(struct fake_http *f,
                     const struct transport_request *req,
                     struct transport_response *resp)
{
        for (size_t i = f->n_routes; i-- > 0;) {
                struct fake_route *r = &f->routes[i];

                size_t n = strlen(req->url), k = strlen(r->url_part);

                /* the URL must end with url_part: "machines/abc/" is not its power query */
                if (strcmp(r->method, req->method) != 0 || k > n ||
                    strcmp(req->url + n - k, r->url_part) != 0 || (r->times && r->hits >= r->times))
                        continue;
                r->hits++;
                if (r->fail) {
                        (void)snprintf(f->t.error, sizeof(f->t.error), "fake transport error");
                        return r->fail;
                }
                answer(resp, r->status, r->body, r->retry_after_s);
                return 0;
        }
        answer(resp, 404, "Not Found", -1);
        return 0;
}

/* RFC 7386: patch applied to target (consumed); returns the result. */
static cJSON *merge_apply(cJSON *target, const cJSON *patch)
{
        const cJSON *m;

        if (!cJSON_IsObject(patch)) {
                cJSON_Delete(target);
                return cJSON_Duplicate(patch, true);
        }
        if (!cJSON_IsObject(target)) {
                cJSON_Delete(target);
                target = cJSON_CreateObject();
        }
        cJSON_ArrayForEach (m, patch) {
                cJSON *old = cJSON_DetachItemFromObjectCaseSensitive(target, m->string);

                if (cJSON_IsNull(m)) {
                        cJSON_Delete(old);
                        continue;
                }
                cJSON_AddItemToObject(target, m->string, merge_apply(old, m));
        }
        return target;
}

static struct fake_object *kube_find(struct fake_http *f, const char *url)
{
        for (size_t i = 0; i < f->n_objs; i++)
                if (!f->objs[i].gone && strcmp(f->objs[i].url, url) == 0)
                        return &f->objs[i];
        return NULL;
}

static void kube_bump(struct fake_http *f, cJSON *obj)
{
        char rv[16];
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

        (void)snprintf(rv, sizeof(rv), "%u", ++f->rv);
        cJSON_DeleteItemFromObjectCaseSensitive(meta, "resourceVersion");
        cJSON_AddStringToObject(meta, "resourceVersion", rv);
}

static int kube_send(struct fake_http *f,
                     const struct transport_request *req,
                     struct transport_response *resp)
{
        static const char *const not_found =
                "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\",\"code\":404}";
        char *url = xstrdup(req->url), *q = strchr(url, '?');
        size_t n;
        struct fake_object *o;

        if (f->refuse && strncmp(url, f->refuse, strlen(f->refuse)) == 0) {
                free(url);
                answer(resp, 401, "{\"kind\":\"Status\",\"code\":401}", -1);
                return 0;
        }
        if (q)
                *q = '\0';
        n = strlen(url);
        if (n > 7 && strcmp(url + n - 7, "/status") == 0)
                url[n - 7] = '\0';
        o = kube_find(f, url);
        free(url);
        if (!o) {
                answer(resp, 404, not_found, -1);
                return 0;
        }
        if (strcmp(req->method, "PATCH") == 0) {
                cJSON *patch = cJSON_ParseWithLength(req->body, req->body_len);
                const cJSON *fin;

                assert_non_null(patch);
                o->obj = merge_apply(o->obj, patch);
                cJSON_Delete(patch);
                kube_bump(f, o->obj);
                fin = json_at(o->obj, "metadata.finalizers");
                if (json_at(o->obj, "metadata.deletionTimestamp") && cJSON_GetArraySize(fin) == 0)
                        o->gone = true;
        } else if (strcmp(req->method, "GET") != 0) {
                answer(resp, 405, "{}", -1);
                return 0;
        }
        resp->status = 200;
        resp->body = cJSON_PrintUnformatted(o->obj);
        resp->body_len = strlen(resp->body);
        resp->content_type = xstrdup("application/json");
        resp->retry_after_s = -1;
        return 0;
}

static int fake_send(struct http_transport *t,
                     const struct transport_request *req,
                     struct transport_response *resp)
{
        struct fake_http *f = container_of(t, struct fake_http, t);
        struct fake_request *r;
        const char *api = strstr(req->url, "api/2.0/");

        assert_true(f->n_reqs < ARRAY_SIZE(f->reqs));
        r = &f->reqs[f->n_reqs++];
        r->method = xstrdup(req->method);
        r->path = xstrdup(f->maas && api ? api + strlen("api/2.0/") : req->url);
        if (f->maas)
                r->body = url_decode(req->body ? req->body : "", req->body ? req->body_len : 0);
        else
                r->body = xstrndup(req->body ? req->body : "", req->body ? req->body_len : 0);
        return f->maas ? maas_send(f, req, resp) : kube_send(f, req, resp);
}

static void fake_destroy(struct http_transport *t)
{
        (void)t;
}

static void fake_init(struct fake_http *f, bool maas)
{
        *f = (struct fake_http){ .t = { .send = fake_send, .destroy = fake_destroy },
                                 .maas = maas };
}

static void fake_forget_requests(struct fake_http *f)
{
        for (size_t i = 0; i < f->n_reqs; i++) {
                free(f->reqs[i].method);
                free(f->reqs[i].path);
                free(f->reqs[i].body);
        }
        f->n_reqs = 0;
}

static void fake_release(struct fake_http *f)
{
        fake_forget_requests(f);
        for (size_t i = 0; i < f->n_routes; i++) {
                free(f->routes[i].method);
                free(f->routes[i].url_part);
                free(f->routes[i].body);
        }
        for (size_t i = 0; i < f->n_objs; i++) {
                free(f->objs[i].url);
                cJSON_Delete(f->objs[i].obj);
        }
}

/* Adds a MAAS answer (newest first). body is printf-style. */
static UNUSED PRINTF_LIKE(5, 6) struct fake_route *maas_route(struct fake_http *f,
                                                              const char *method,
                                                              const char *url_part,
                                                              long status,
                                                              const char *fmt,
                                                              ...)
{
        struct fake_route *r;
        va_list ap;
        char buf[8192];

        assert_true(f->n_routes < ARRAY_SIZE(f->routes));
        va_start(ap, fmt);
        (void)vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        r = &f->routes[f->n_routes++];
        *r = (struct fake_route){ .method = xstrdup(method),
                                  .url_part = xstrdup(url_part),
                                  .status = status,
                                  .body = xstrdup(buf),
                                  .retry_after_s = -1 };
        return r;
}

/* How many requests were method + a path containing part (and a body containing
 * body_part when not NULL). */
static UNUSED size_t requests(const struct fake_http *f,
                              const char *method,
                              const char *part,
                              const char *body_part)
{
        size_t n = 0;

        for (size_t i = 0; i < f->n_reqs; i++)
                if (strcmp(f->reqs[i].method, method) == 0 && strstr(f->reqs[i].path, part) &&
                    (!body_part || strstr(f->reqs[i].body, body_part)))
                        n++;
        return n;
}

/* Index of the first such request at or after from, or -1. */
static UNUSED long request_at(const struct fake_http *f,
                              size_t from,
                              const char *method,
                              const char *part)
{
        for (size_t i = from; i < f->n_reqs; i++)
                if (strcmp(f->reqs[i].method, method) == 0 && strstr(f->reqs[i].path, part))
                        return (long)i;
        return -1;
}

/* Writes (PATCH, PUT, POST, DELETE) made so far. */
static UNUSED size_t writes(const struct fake_http *f)
{
        size_t n = 0;

        for (size_t i = 0; i < f->n_reqs; i++)
                n += strcmp(f->reqs[i].method, "GET") != 0;
        return n;
}

static UNUSED void dump_requests(const char *name, const struct fake_http *f)
{
        for (size_t i = 0; i < f->n_reqs; i++)
                print_message("  %s %zu: %s %s %s\n", name, i, f->reqs[i].method, f->reqs[i].path,
                              f->reqs[i].body);
}

/* --- the world ---------------------------------------------------------------------------- */

struct world {
        struct clock_fake clock;
        struct kube_config kube_cfg;
        struct maas_config maas_cfg;
        struct provider *p;
        struct reconciler_worker *w;
        struct fake_http maas, kube;
        uint64_t slept_ms[16];
        size_t n_sleeps;
        struct reconcile_result res;
        int rc;
};

static void record_sleep(void *ud, uint64_t ms)
{
        struct world *w = ud;

        if (w->n_sleeps < ARRAY_SIZE(w->slept_ms))
                w->slept_ms[w->n_sleeps++] = ms;
}

static UNUSED struct provider_settings world_settings(void)
{
        return (struct provider_settings){ .deploy_timeout_ms = 1800000,
                                           .machine_refresh_ms = 60000,
                                           .release_erase = true };
}

static UNUSED struct world *world_new(const struct provider_settings *s)
{
        struct world *w = xcalloc(1, sizeof(*w));
        char *msg = NULL;

        clock_fake_init(&w->clock, 1000000, WALL_S);
        fake_init(&w->maas, true);
        fake_init(&w->kube, false);
        w->kube_cfg.server = xstrdup(MGMT);
        assert_int_equal(maas_config_parse(MAAS_URL, "ck:tk:ts", &w->maas_cfg, &msg), 0);
        assert_int_equal(provider_new(&(struct provider_opts){ .settings = *s,
                                                               .kube = &w->kube_cfg,
                                                               .maas = &w->maas_cfg,
                                                               .clock = &w->clock.ops },
                                      &w->p),
                         0);
        assert_int_equal(provider_new_informers(w->p), 0);
        assert_int_equal(reconciler_worker_new(
                                 w->p,
                                 &(struct reconciler_worker_opts){ .kube_transport = &w->kube.t,
                                                                   .maas_transport = &w->maas.t,
                                                                   .workload_transport = &w->kube.t,
                                                                   .sleep_ms = record_sleep,
                                                                   .sleep_ud = w },
                                 &w->w),
                         0);
        return w;
}

static UNUSED void world_free(struct world *w)
{
        reconciler_worker_free(w->w);
        provider_free(w->p);
        maas_config_release(&w->maas_cfg);
        kube_config_release(&w->kube_cfg);
        fake_release(&w->maas);
        fake_release(&w->kube);
        free(w);
}

/* Puts obj (consumed) into the fake API at url, and into inf's cache when inf is set. */
static UNUSED void world_put(struct world *w, struct informer *inf, const char *url, cJSON *obj)
{
        struct fake_object *o = kube_find(&w->kube, url);

        if (!o) {
                assert_true(w->kube.n_objs < ARRAY_SIZE(w->kube.objs));
                o = &w->kube.objs[w->kube.n_objs++];
                *o = (struct fake_object){ .url = xstrdup(url) };
        }
        cJSON_Delete(o->obj);
        o->obj = obj;
        o->inf = inf;
        kube_bump(&w->kube, o->obj);
        if (inf)
                assert_int_equal(informer_feed_event(inf, KUBE_WATCH_MODIFIED,
                                                     cJSON_Duplicate(o->obj, true)),
                                 0);
}

/* The object the fake API holds at url (borrowed), or NULL when deleted / absent. */
static UNUSED const cJSON *world_get(struct world *w, const char *url)
{
        struct fake_object *o = kube_find(&w->kube, url);

        return o ? o->obj : NULL;
}

/* What a watch would deliver after a pass: every object into its informer. */
static UNUSED void world_sync(struct world *w)
{
        for (size_t i = 0; i < w->kube.n_objs; i++) {
                struct fake_object *o = &w->kube.objs[i];

                if (!o->inf)
                        continue;
                assert_int_equal(informer_feed_event(
                                         o->inf, o->gone ? KUBE_WATCH_DELETED : KUBE_WATCH_MODIFIED,
                                         cJSON_Duplicate(o->obj, true)),
                                 0);
                if (o->gone)
                        o->inf = NULL;
        }
}

/* Removes the object at url (as a user's delete of an object without finalizers). */
static UNUSED void world_delete(struct world *w, const char *url)
{
        struct fake_object *o = kube_find(&w->kube, url);

        assert_non_null(o);
        if (o)
                o->gone = true;
        world_sync(w);
}

/* The condition type's member (status, reason, message) on the stored object, or NULL. */
static UNUSED const char *condition(const cJSON *obj, const char *type, const char *member)
{
        const cJSON *k;

        cJSON_ArrayForEach (k, json_at(obj, "status.conditions")) {
                const char *t = json_find_str(k, "type", NULL);

                if (t && strcmp(t, type) == 0)
                        return json_find_str(k, member, NULL);
        }
        return NULL;
}

static UNUSED bool has_finalizer(const cJSON *obj, const char *finalizer)
{
        const cJSON *f;

        cJSON_ArrayForEach (f, json_at(obj, "metadata.finalizers"))
                if (cJSON_IsString(f) && strcmp(f->valuestring, finalizer) == 0)
                        return true;
        return false;
}

/* The workload cluster's <cluster>-kubeconfig Secret, pointing at WORKLOAD. */
static UNUSED void world_put_kubeconfig(struct world *w, const char *cluster)
{
        static const char yaml[] = "apiVersion: v1\nkind: Config\n"
                                   "clusters:\n- name: w\n  cluster:\n    server: " WORKLOAD "\n"
                                   "    insecure-skip-tls-verify: true\n"
                                   "contexts:\n- name: w\n  context:\n    cluster: w\n    user: u\n"
                                   "current-context: w\n"
                                   "users:\n- name: u\n  user:\n    token: workload-token\n";
        char *b64 = base64_encode(yaml, sizeof(yaml) - 1);
        char url[256];

        (void)snprintf(url, sizeof(url), CORE_API "/secrets/%s-kubeconfig", cluster);
        world_put(w, NULL, url,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"%s-kubeconfig\",\"namespace\":\"" NS "\"},\"data\":{\"value\":"
                            "\"%s\"}}",
                            cluster, b64));
        free(b64);
}
