/*
 * reconcile_world: the fakes and the world of the reconciler unit tests (reconcile_world.h).
 */
#include "reconcile_world.h"

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
        if (f->forbid && strncmp(url, f->forbid, strlen(f->forbid)) == 0) {
                free(url);
                answer(resp, 403,
                       "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Forbidden\","
                       "\"code\":403}",
                       -1);
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
                o->obj = json_merge_patch(o->obj, patch);
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

/* A streamed GET (discovery): the stored body goes to the chunk callback at once. */
static int fake_stream(struct http_transport *t,
                       const struct transport_request *req,
                       const struct transport_stream *s,
                       struct transport_response *resp)
{
        int r = fake_send(t, req, resp);

        if (r == 0 && resp->status >= 200 && resp->status < 300) {
                (void)s->on_chunk(s->arg, resp->body, resp->body_len);
                resp->body[0] = '\0';
                resp->body_len = 0;
        }
        return r;
}

static void fake_destroy(struct http_transport *t)
{
        (void)t;
}

static void fake_init(struct fake_http *f, bool maas)
{
        *f = (struct fake_http){
                .t = { .send = fake_send, .stream = fake_stream, .destroy = fake_destroy },
                .maas = maas
        };
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

struct fake_route *maas_route(struct fake_http *f,
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

size_t requests(const struct fake_http *f,
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

long request_at(const struct fake_http *f, size_t from, const char *method, const char *part)
{
        for (size_t i = from; i < f->n_reqs; i++)
                if (strcmp(f->reqs[i].method, method) == 0 && strstr(f->reqs[i].path, part))
                        return (long)i;
        return -1;
}

size_t writes(const struct fake_http *f)
{
        size_t n = 0;

        for (size_t i = 0; i < f->n_reqs; i++)
                n += strcmp(f->reqs[i].method, "GET") != 0;
        return n;
}

void dump_requests(const char *name, const struct fake_http *f)
{
        for (size_t i = 0; i < f->n_reqs; i++)
                print_message("  %s %zu: %s %s %s\n", name, i, f->reqs[i].method, f->reqs[i].path,
                              f->reqs[i].body);
}

/* --- the world ---------------------------------------------------------------------------- */

const char *world_capi = CAPI_V1BETA2;

/* The other version's readiness field holds the opposite of the real one (see the header). */
static void put_ready(cJSON *st, bool v2, const char *v2_name, const char *v1_name, bool value)
{
        json_set_bool(json_child_object(st, "initialization", NULL), v2_name, v2 ? value : !value);
        json_set_bool(st, v1_name, v2 ? !value : value);
}

/* A reference: {apiGroup, kind, name} in v1beta2, {apiVersion, kind, name} in v1beta1. */
static cJSON *ref(
        bool v2, const char *group, const char *version, const char *kind, const char *name)
{
        cJSON *r = cJSON_CreateObject();
        char *av = xasprintf("%s/%s", group, version);

        json_set_string(r, v2 ? "apiGroup" : "apiVersion", v2 ? group : av);
        json_set_string(r, "kind", kind);
        json_set_string(r, "name", name);
        free(av);
        return r;
}

cJSON *world_cluster(const struct world_cluster *c)
{
        bool v2 = strcmp(world_capi, CAPI_V1BETA2) == 0;
        cJSON *o = test_json("{\"apiVersion\":\"cluster.x-k8s.io/%s\",\"kind\":\"Cluster\","
                             "\"metadata\":{\"name\":\"c1\",\"namespace\":\"" NS "\",\"uid\":"
                             "\"uid-c1\"},\"spec\":{},\"status\":{}}",
                             world_capi);
        cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
        cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");

        if (c->paused || !v2) /* optional in v1beta2 */
                json_set_bool(spec, "paused", c->paused);
        if (c->api_port)
                json_set_int64(json_child_object(spec, "clusterNetwork", NULL), "apiServerPort",
                               c->api_port);
        if (c->endpoint_host) {
                cJSON *ep = json_child_object(spec, "controlPlaneEndpoint", NULL);

                json_set_string(ep, "host", c->endpoint_host);
                json_set_int64(ep, "port", 6443);
        }
        json_set_item(spec, "infrastructureRef",
                      ref(v2, SCHEMA_GROUP, SCHEMA_VERSION, SCHEMA_KIND_CLUSTER, "c1"));
        json_set_item(spec, "controlPlaneRef",
                      ref(v2, "controlplane.cluster.x-k8s.io", world_capi, "KubeadmControlPlane",
                          "c1-control-plane"));
        put_ready(st, v2, "infrastructureProvisioned", "infrastructureReady", !c->not_provisioned);
        put_ready(st, v2, "controlPlaneInitialized", "controlPlaneReady",
                  c->control_plane_initialized);
        return o;
}

cJSON *world_machine(const struct world_machine *m)
{
        bool v2 = strcmp(world_capi, CAPI_V1BETA2) == 0;
        cJSON *o = test_json("{\"apiVersion\":\"cluster.x-k8s.io/%s\",\"kind\":\"Machine\","
                             "\"metadata\":{\"name\":\"%s\",\"namespace\":\"" NS "\",\"uid\":"
                             "\"uid-machine\",\"labels\":{\"cluster.x-k8s.io/cluster-name\":"
                             "\"c1\"}},\"spec\":{\"clusterName\":\"c1\",\"bootstrap\":{}},"
                             "\"status\":{}}",
                             world_capi, m->name);
        cJSON *spec = cJSON_GetObjectItemCaseSensitive(o, "spec");
        cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");

        if (m->control_plane)
                json_set_string(
                        json_child_object(json_child_object(o, "metadata", NULL), "labels", NULL),
                        SCHEMA_LABEL_CONTROL_PLANE, "");
        if (m->data_secret)
                json_set_string(cJSON_GetObjectItemCaseSensitive(spec, "bootstrap"),
                                "dataSecretName", m->data_secret);
        if (m->failure_domain)
                json_set_string(spec, "failureDomain", m->failure_domain);
        json_set_item(spec, "infrastructureRef",
                      ref(v2, SCHEMA_GROUP, SCHEMA_VERSION, SCHEMA_KIND_MACHINE, m->name));
        put_ready(st, v2, "infrastructureProvisioned", "infrastructureReady", m->node != NULL);
        if (m->node) {
                cJSON *n = json_child_object(st, "nodeRef", NULL);

                if (!v2) { /* a v1beta1 ObjectReference */
                        json_set_string(n, "apiVersion", "v1");
                        json_set_string(n, "kind", "Node");
                }
                json_set_string(n, "name", m->node);
        }
        return o;
}

/* The fake API's discovery document for cluster.x-k8s.io: world_capi only. */
static void put_discovery(struct world *w)
{
        world_put(w, NULL, MGMT "/apis/cluster.x-k8s.io",
                  test_json("{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",\"name\":"
                            "\"cluster.x-k8s.io\",\"versions\":[{\"groupVersion\":"
                            "\"cluster.x-k8s.io/%s\",\"version\":\"%s\"}],"
                            "\"preferredVersion\":{\"groupVersion\":\"cluster.x-k8s.io/%s\","
                            "\"version\":\"%s\"}}",
                            world_capi, world_capi, world_capi, world_capi));
}

static void record_sleep(void *ud, uint64_t ms)
{
        struct world *w = ud;

        if (w->n_sleeps < ARRAY_SIZE(w->slept_ms))
                w->slept_ms[w->n_sleeps++] = ms;
}

struct provider_settings world_settings(void)
{
        return (struct provider_settings){ .deploy_timeout_ms = 1800000,
                                           .machine_refresh_ms = 60000,
                                           .release_erase = true };
}

struct world *world_new(const struct provider_settings *s)
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
        put_discovery(w);
        assert_int_equal(provider_discover(w->p, &w->kube.t), 0);
        assert_string_equal(w->p->capi.version, world_capi);
        assert_string_equal(w->p->capi.clusters.version, world_capi);
        fake_forget_requests(&w->kube);
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

void world_free(struct world *w)
{
        reconciler_worker_free(w->w);
        provider_free(w->p);
        maas_config_release(&w->maas_cfg);
        kube_config_release(&w->kube_cfg);
        fake_release(&w->maas);
        fake_release(&w->kube);
        free(w);
}

void world_put(struct world *w, struct informer *inf, const char *url, cJSON *obj)
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

const cJSON *world_get(struct world *w, const char *url)
{
        struct fake_object *o = kube_find(&w->kube, url);

        return o ? o->obj : NULL;
}

void world_sync(struct world *w)
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

void world_delete(struct world *w, const char *url)
{
        struct fake_object *o = kube_find(&w->kube, url);

        assert_non_null(o);
        if (o)
                o->gone = true;
        world_sync(w);
}

const char *condition(const cJSON *obj, const char *type, const char *member)
{
        const cJSON *k;

        cJSON_ArrayForEach (k, json_at(obj, "status.conditions")) {
                const char *t = json_find_str(k, "type", NULL);

                if (t && strcmp(t, type) == 0)
                        return json_find_str(k, member, NULL);
        }
        return NULL;
}

bool has_finalizer(const cJSON *obj, const char *finalizer)
{
        const cJSON *f;

        cJSON_ArrayForEach (f, json_at(obj, "metadata.finalizers"))
                if (cJSON_IsString(f) && strcmp(f->valuestring, finalizer) == 0)
                        return true;
        return false;
}

void world_put_kubeconfig(struct world *w, const char *cluster)
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

void world_finish(struct world *w, void (*check)(struct world *w))
{
        if (getenv("RECONCILE_TEST_DUMP")) {
                dump_requests("maas", &w->maas);
                dump_requests("kube", &w->kube);
        }
        check(w);
        world_free(w);
}

int world_run_rows(const void *rows, size_t n, size_t row_size, void (*run)(void **state))
{
        static const char *const versions[] = { CAPI_V1BETA2, CAPI_V1BETA1 };
        struct CMUnitTest *tests = xcalloc(n, sizeof(*tests));
        int ret = 0;

        for (size_t v = 0; v < ARRAY_SIZE(versions); v++) {
                char group[32];

                world_capi = versions[v];
                for (size_t i = 0; i < n; i++) {
                        const char *row = (const char *)rows + i * row_size;
                        const char *name;

                        memcpy(&name, row, sizeof(name));
                        tests[i] = (struct CMUnitTest){ .name = name,
                                                        .test_func = run,
                                                        .initial_state = (void *)(uintptr_t)row };
                }
                (void)snprintf(group, sizeof(group), "reconcile/%s", world_capi);
                ret += _cmocka_run_group_tests(group, tests, n, NULL, NULL);
        }
        world_capi = CAPI_V1BETA2;
        free(tests);
        return ret;
}
