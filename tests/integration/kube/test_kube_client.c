/*
 * Integration: the Kubernetes client (reconcile/kube_*.c over the libcurl transport, TLS)
 * against a real kube-sim process on 127.0.0.1. One kube-sim serves the whole group (short
 * event history so tests can expire resourceVersions, bookmarks every 0.2 s); the
 * client's configuration comes from the kubeconfig kube-sim writes (CA data + token).
 * Each test works in its own namespace. Retries record their sleeps instead of sleeping;
 * the rate limiter runs on a fake clock.
 *
 * Needs $CAPMAAS_BUILD_DIR/kube-sim and $CAPMAAS_SOURCE_DIR (CRDs in config/crd/bases).
 * ctest: concurrency (one test stops a watch from another thread).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "clock.h"
#include "err.h"
#include "kube_client.h"
#include "kubesim.h"
#include "testutil.h"
#include "xalloc.h"

#define HISTORY 60

static struct kubesim sim;

struct fx {
        struct kube_client *c;
        struct kube_error e;
        uint64_t slept[16];
        size_t n_slept;
};

/* --- kube-sim admin ------------------------------------------------------------------- */

/* Counts logged requests with this method whose path ends with `suffix` and, when
 * `query_key` is non-NULL, that carry (want_key) or lack (!want_key) that query key. */
static int sim_count(const char *method, const char *suffix, const char *query_key, bool want_key)
{
        return kubesim_count_requests(&sim, &(struct kubesim_match){ .method = method,
                                                                     .path_suffix = suffix,
                                                                     .query_key = query_key,
                                                                     .without_key = !want_key });
}

/* --- objects ---------------------------------------------------------------------------- */

static void make_ns(struct kube_client *c, const char *ns)
{
        char *txt = xasprintf("{\"metadata\":{\"name\":\"%s\"}}", ns);
        cJSON *o = cJSON_Parse(txt);

        assert_int_equal(kube_create(c, &KUBE_RES_NAMESPACES, NULL, o, NULL, NULL), 0);
        cJSON_Delete(o);
        free(txt);
}

static cJSON *cm(const char *name, const char *value)
{
        cJSON *o = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(o, "metadata");

        cJSON_AddStringToObject(o, "apiVersion", "v1");
        cJSON_AddStringToObject(o, "kind", "ConfigMap");
        if (name)
                cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(md, "labels"), "app", "t");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "data"), "k", value);
        return o;
}

static char *create_cm(struct kube_client *c, const char *ns, const char *name, const char *v)
{
        cJSON *o = cm(name, v), *got = NULL;
        char *rv;

        assert_int_equal(kube_create(c, &KUBE_RES_CONFIGMAPS, ns, o, &got, NULL), 0);
        rv = xstrdup(kube_meta_str(got, "resourceVersion"));
        cJSON_Delete(o);
        cJSON_Delete(got);
        return rv;
}

/* n writes in namespace "churn": enough of them push older events out of the history. */
static void churn(struct kube_client *c, int n)
{
        cJSON *o = cm(NULL, "x");

        cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(o, "metadata"), "generateName",
                                "c-");
        for (int i = 0; i < n; i++)
                assert_int_equal(kube_create(c, &KUBE_RES_CONFIGMAPS, "churn", o, NULL, NULL), 0);
        cJSON_Delete(o);
}

static char *big_value(size_t n)
{
        char *v = xmalloc(n + 1);

        memset(v, 'v', n);
        v[n] = '\0';
        return v;
}

/* --- fixtures --------------------------------------------------------------------------- */

static void record_sleep(void *arg, uint64_t ms)
{
        struct fx *f = arg;

        if (f->n_slept < ARRAY_SIZE(f->slept))
                f->slept[f->n_slept] = ms;
        f->n_slept++;
}

static struct kube_client *new_client(struct fx *f, const struct kube_config *cfg, size_t max)
{
        struct kube_client *c = NULL;

        assert_int_equal(kube_client_new(&(struct kube_client_opts){ .config = cfg,
                                                                     .max_body = max,
                                                                     .sleep_ms = record_sleep,
                                                                     .sleep_arg = f },
                                         &c),
                         0);
        return c;
}

static void install_crds(struct kube_client *c)
{
        const char *src = test_env("CAPMAAS_SOURCE_DIR");
        char *out = xasprintf("%s/crds.json", sim.dir);
        char *json = NULL;
        cJSON *list, *it;
        FILE *fp;
        long n;

        assert_int_equal(
                test_sh("/usr/bin/python3 -c 'import sys,yaml,json; print(json.dumps([yaml."
                        "safe_load(open(p)) for p in sys.argv[1:]]))' "
                        "%s/config/crd/bases/*.yaml > %s",
                        src, out),
                0);
        fp = fopen(out, "r");
        assert_non_null(fp);
        fseek(fp, 0, SEEK_END);
        n = ftell(fp);
        rewind(fp);
        json = xmalloc((size_t)n + 1);
        assert_int_equal(fread(json, 1, (size_t)n, fp), (size_t)n);
        json[n] = '\0';
        fclose(fp);
        list = cJSON_Parse(json);
        assert_int_equal(cJSON_GetArraySize(list), 4);
        cJSON_ArrayForEach (it, list)
                assert_int_equal(kube_create(c, &KUBE_RES_CRDS, NULL, it, NULL, NULL), 0);
        cJSON_Delete(list);
        free(json);
        free(out);
}

static int group_setup(void **state)
{
        struct fx f = { 0 };

        (void)state;
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (kubesim_start(&sim, (const char *const[]){ "--history", "60", "--bookmark-interval",
                                                       "0.2", NULL }) < 0)
                return -1;
        f.c = new_client(&f, &sim.cfg, 0);
        make_ns(f.c, "churn");
        install_crds(f.c);
        kube_client_free(f.c);
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        (void)kubesim_stop(&sim);
        curl_global_cleanup();
        return 0;
}

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));

        f->c = new_client(f, &sim.cfg, 0);
        kubesim_faults(&sim, "{\"delayMs\":0,\"errorRate\":0,\"expireNextWatch\":false}");
        kubesim_clear_requests(&sim);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        kubesim_faults(&sim, "{\"errorRate\":0}");
        kube_client_free(f->c);
        kube_error_release(&f->e);
        free(f);
        return 0;
}

/* --- verbs ------------------------------------------------------------------------------ */

static void test_get__object_over_tls_and_not_found(void **state)
{
        struct fx *f = *state;
        cJSON *got = NULL;
        char *rv;

        make_ns(f->c, "get");
        rv = create_cm(f->c, "get", "a", "1");
        assert_int_equal(kube_get(f->c, &KUBE_RES_CONFIGMAPS, "get", "a", &got, &f->e), 0);
        assert_string_equal(kube_meta_str(got, "resourceVersion"), rv);
        assert_string_equal(kube_label(got, "app"), "t");
        cJSON_Delete(got);
        got = NULL;
        assert_int_equal(kube_get(f->c, &KUBE_RES_CONFIGMAPS, "get", "nope", &got, &f->e),
                         CM_ENOTFOUND);
        assert_null(got);
        assert_int_equal(f->e.http_status, 404);
        assert_string_equal(f->e.reason, "NotFound");
        assert_non_null(strstr(f->e.message, "\"nope\" not found"));
        /* a cluster-scoped kind ignores ns */
        assert_int_equal(kube_get(f->c, &KUBE_RES_NAMESPACES, "ignored", "get", &got, &f->e), 0);
        assert_null(f->e.reason); /* reset by the successful call */
        cJSON_Delete(got);
        free(rv);
}

static void test_list__follows_continue_across_pages(void **state)
{
        struct fx *f = *state;
        cJSON *list = NULL;
        char name[16];

        make_ns(f->c, "list");
        for (int i = 0; i < 7; i++) {
                snprintf(name, sizeof(name), "cm-%d", i);
                free(create_cm(f->c, "list", name, "v"));
        }
        assert_int_equal(
                kube_list(f->c, &KUBE_RES_CONFIGMAPS, "list",
                          &(struct kube_list_opts){ .page_size = 2, .label_selector = "app=t" },
                          &list, &f->e),
                0);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "items")), 7);
        assert_non_null(kube_meta_str(list, "resourceVersion"));
        assert_null(kube_meta_str(list, "continue"));
        assert_string_equal(
                kube_meta_str(
                        cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(list, "items"), 6),
                        "name"),
                "cm-6");
        cJSON_Delete(list);
        assert_int_equal(sim_count("GET", "/namespaces/list/configmaps", "continue", false), 1);
        assert_int_equal(sim_count("GET", "/namespaces/list/configmaps", "continue", true), 3);
        /* a selector that matches nothing: one page, no items */
        assert_int_equal(kube_list(f->c, &KUBE_RES_CONFIGMAPS, "list",
                                   &(struct kube_list_opts){ .label_selector = "app=none" }, &list,
                                   &f->e),
                         0);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "items")), 0);
        cJSON_Delete(list);
}

/* What kube_list_pages handed over, page by page. */
struct pages {
        int n, firsts, restarts;
        int items;     /* since the last restart */
        int max_items; /* on one page */
        int stop_at;   /* return nonzero on this page (1-based); 0 = never */
};

static int record_page(void *arg, cJSON *page, bool first, bool restart)
{
        struct pages *p = arg;
        int k = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(page, "items"));

        p->n++;
        p->firsts += first;
        p->restarts += restart;
        if (restart)
                p->items = 0;
        p->items += k;
        if (k > p->max_items)
                p->max_items = k;
        if (first)
                assert_non_null(kube_meta_str(page, "resourceVersion"));
        cJSON_Delete(page);
        return p->n == p->stop_at ? 7 : 0;
}

/* An informer's relist holds one page at a time: each page is handed over as it arrives;
 * a nonzero answer stops the list there. */
static void test_list__pages_are_handed_over_one_at_a_time(void **state)
{
        struct fx *f = *state;
        struct pages p = { 0 };
        char name[16];

        make_ns(f->c, "pages");
        for (int i = 0; i < 7; i++) {
                snprintf(name, sizeof(name), "cm-%d", i);
                free(create_cm(f->c, "pages", name, "v"));
        }
        assert_int_equal(kube_list_pages(f->c, &KUBE_RES_CONFIGMAPS, "pages",
                                         &(struct kube_list_opts){ .page_size = 2 }, record_page,
                                         &p, &f->e),
                         0);
        assert_int_equal(p.n, 4);
        assert_int_equal(p.firsts, 1);
        assert_int_equal(p.restarts, 0);
        assert_int_equal(p.items, 7);
        assert_int_equal(p.max_items, 2);
        p = (struct pages){ .stop_at = 2 };
        assert_int_equal(kube_list_pages(f->c, &KUBE_RES_CONFIGMAPS, "pages",
                                         &(struct kube_list_opts){ .page_size = 2 }, record_page,
                                         &p, &f->e),
                         7);
        assert_int_equal(p.n, 2);
}

static void test_create__already_exists_and_invalid_with_causes(void **state)
{
        struct fx *f = *state;
        cJSON *o = cm("dup", "1"), *noname = cm(NULL, "1");
        const cJSON *cause;

        make_ns(f->c, "create");
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "create", o, NULL, &f->e), 0);
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "create", o, NULL, &f->e),
                         CM_EEXIST);
        assert_string_equal(f->e.reason, "AlreadyExists");
        assert_int_equal(f->e.http_status, 409);
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "create", noname, NULL, &f->e),
                         CM_EINVAL);
        assert_int_equal(f->e.http_status, 422);
        assert_string_equal(f->e.reason, "Invalid");
        cause = cJSON_GetArrayItem(f->e.causes, 0);
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(cause, "field")->valuestring,
                            "metadata.name");
        cJSON_Delete(o);
        cJSON_Delete(noname);
}

static void test_update__stale_resource_version_conflicts(void **state)
{
        struct fx *f = *state;
        cJSON *o = NULL, *stale, *got = NULL;

        make_ns(f->c, "update");
        free(create_cm(f->c, "update", "u", "1"));
        assert_int_equal(kube_get(f->c, &KUBE_RES_CONFIGMAPS, "update", "u", &o, &f->e), 0);
        stale = cJSON_Duplicate(o, true);
        cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "data"), "k",
                                               cJSON_CreateString("2"));
        assert_int_equal(
                kube_update(f->c, &KUBE_RES_CONFIGMAPS, "update", "u", NULL, o, &got, &f->e), 0);
        assert_string_not_equal(kube_meta_str(got, "resourceVersion"),
                                kube_meta_str(stale, "resourceVersion"));
        assert_int_equal(
                kube_update(f->c, &KUBE_RES_CONFIGMAPS, "update", "u", NULL, stale, NULL, &f->e),
                CM_ECONFLICT);
        assert_string_equal(f->e.reason, "Conflict");
        cJSON_Delete(o);
        cJSON_Delete(stale);
        cJSON_Delete(got);
}

static void test_patch__merge_json_and_apply(void **state)
{
        struct fx *f = *state;
        cJSON *got = NULL;

        make_ns(f->c, "patch");
        free(create_cm(f->c, "patch", "p", "1"));
        assert_int_equal(
                kube_patch(f->c,
                           &(struct kube_patch_opts){
                                   .resource = &KUBE_RES_CONFIGMAPS,
                                   .ns = "patch",
                                   .name = "p",
                                   .subresource = NULL,
                                   .type = KUBE_PATCH_MERGE,
                                   .body = "{\"metadata\":{\"labels\":{\"merged\":\"yes\"}}}" },
                           &got, &f->e),
                0);
        assert_string_equal(kube_label(got, "merged"), "yes");
        assert_string_equal(kube_label(got, "app"), "t");
        cJSON_Delete(got);
        assert_int_equal(
                kube_patch(
                        f->c,
                        &(struct kube_patch_opts){
                                .resource = &KUBE_RES_CONFIGMAPS,
                                .ns = "patch",
                                .name = "p",
                                .subresource = NULL,
                                .type = KUBE_PATCH_JSON,
                                .body = "[{\"op\":\"replace\",\"path\":\"/data/"
                                        "k\",\"value\":\"j\"},"
                                        "{\"op\":\"remove\",\"path\":\"/metadata/labels/app\"}]" },
                        &got, &f->e),
                0);
        assert_null(kube_label(got, "app"));
        assert_string_equal(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(got, "data"), "k")
                        ->valuestring,
                "j");
        cJSON_Delete(got);
        assert_int_equal(
                kube_patch(
                        f->c,
                        &(struct kube_patch_opts){
                                .resource = &KUBE_RES_CONFIGMAPS,
                                .ns = "patch",
                                .name = "p",
                                .subresource = NULL,
                                .type = KUBE_PATCH_APPLY,
                                .body = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                                        "\"metadata\":"
                                        "{\"name\":\"p\",\"annotations\":{\"applied\":\"1\"}}}" },
                        &got, &f->e),
                0);
        assert_string_equal(kube_annotation(got, "applied"), "1");
        cJSON_Delete(got);
        assert_int_equal(sim_count("PATCH", "/configmaps/p", "force", true), 1);
        assert_int_equal(kube_patch(f->c,
                                    &(struct kube_patch_opts){
                                            .resource = &KUBE_RES_CONFIGMAPS,
                                            .ns = "patch",
                                            .name = "p",
                                            .subresource = NULL,
                                            .type = KUBE_PATCH_JSON,
                                            .body = "[{\"op\":\"test\",\"path\":\"/data/k\","
                                                    "\"value\":\"other\"}]" },
                                    NULL, &f->e),
                         CM_EINVAL);
}

static void test_status__subresource_update_and_patch_on_a_custom_resource(void **state)
{
        struct fx *f = *state;
        cJSON *o = cJSON_Parse("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                               "\"kind\":\"MaasCluster\",\"metadata\":{\"name\":\"mc\"},"
                               "\"spec\":{\"dnsDomain\":\"maas.test\"}}");
        cJSON *got = NULL, *st;

        make_ns(f->c, "status");
        assert_int_equal(kube_create(f->c, &KUBE_RES_MAASCLUSTERS, "status", o, &got, &f->e), 0);
        st = cJSON_AddObjectToObject(got, "status");
        cJSON_AddBoolToObject(st, "ready", true);
        cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(got, "spec"),
                                               "dnsDomain", cJSON_CreateString("ignored.test"));
        cJSON_Delete(o);
        o = got;
        got = NULL;
        assert_int_equal(
                kube_update(f->c, &KUBE_RES_MAASCLUSTERS, "status", "mc", "status", o, &got, &f->e),
                0);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(got, "status"), "ready")));
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(
                                    cJSON_GetObjectItemCaseSensitive(got, "spec"), "dnsDomain")
                                    ->valuestring,
                            "maas.test"); /* /status keeps the spec */
        cJSON_Delete(got);
        assert_int_equal(
                kube_patch(f->c,
                           &(struct kube_patch_opts){ .resource = &KUBE_RES_MAASCLUSTERS,
                                                      .ns = "status",
                                                      .name = "mc",
                                                      .subresource = "status",
                                                      .type = KUBE_PATCH_MERGE,
                                                      .body = "{\"status\":{\"network\":{"
                                                              "\"dnsName\":\"mc.maas.test\"}}}" },
                           &got, &f->e),
                0);
        assert_string_equal(
                cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(
                                cJSON_GetObjectItemCaseSensitive(got, "status"), "network"),
                        "dnsName")
                        ->valuestring,
                "mc.maas.test");
        cJSON_Delete(got);
        /* CRs refuse strategic merge patch (415) */
        assert_int_equal(kube_patch(f->c,
                                    &(struct kube_patch_opts){ .resource = &KUBE_RES_MAASCLUSTERS,
                                                               .ns = "status",
                                                               .name = "mc",
                                                               .subresource = NULL,
                                                               .type = KUBE_PATCH_STRATEGIC,
                                                               .body = "{}" },
                                    NULL, &f->e),
                         CM_EUNSUPPORTED);
        assert_int_equal(f->e.http_status, 415);
        /* schema validation: causes are copied */
        assert_int_equal(
                kube_patch(f->c,
                           &(struct kube_patch_opts){ .resource = &KUBE_RES_MAASCLUSTERS,
                                                      .ns = "status",
                                                      .name = "mc",
                                                      .subresource = NULL,
                                                      .type = KUBE_PATCH_MERGE,
                                                      .body = "{\"spec\":{\"dnsDomain\":\"\"}}" },
                           NULL, &f->e),
                CM_EINVAL);
        assert_string_equal(f->e.reason, "Invalid");
        assert_true(cJSON_GetArraySize(f->e.causes) >= 1);
        cJSON_Delete(o);
}

static void test_delete__uid_precondition_and_not_found(void **state)
{
        struct fx *f = *state;
        cJSON *got = NULL;

        make_ns(f->c, "delete");
        free(create_cm(f->c, "delete", "d", "1"));
        assert_int_equal(kube_get(f->c, &KUBE_RES_CONFIGMAPS, "delete", "d", &got, &f->e), 0);
        assert_int_equal(kube_delete(f->c, &KUBE_RES_CONFIGMAPS, "delete", "d",
                                     &(struct kube_delete_opts){ .precondition_uid = "not-the-uid",
                                                                 .grace_period_seconds = -1 },
                                     &f->e),
                         CM_ECONFLICT);
        assert_non_null(strstr(f->e.message, "Precondition failed"));
        assert_int_equal(
                kube_delete(f->c, &KUBE_RES_CONFIGMAPS, "delete", "d",
                            &(struct kube_delete_opts){
                                    .propagation_policy = "Foreground",
                                    .grace_period_seconds = 0,
                                    .precondition_uid = kube_meta_str(got, "uid"),
                                    .precondition_rv = kube_meta_str(got, "resourceVersion") },
                            &f->e),
                0);
        assert_int_equal(kube_delete(f->c, &KUBE_RES_CONFIGMAPS, "delete", "d", NULL, &f->e),
                         CM_ENOTFOUND);
        cJSON_Delete(got);
}

static void test_body_cap__oversized_response_is_too_big(void **state)
{
        struct fx *f = *state;
        struct kube_client *small = new_client(f, &sim.cfg, 1024);
        char *v = big_value(4096);
        cJSON *got = NULL;

        make_ns(f->c, "cap");
        free(create_cm(f->c, "cap", "big", v));
        assert_int_equal(kube_get(small, &KUBE_RES_CONFIGMAPS, "cap", "big", &got, &f->e),
                         CM_ETOOBIG);
        assert_null(got);
        assert_int_equal(f->e.http_status, 0);
        assert_int_equal(f->n_slept, 0); /* not retried */
        kube_client_free(small);
        free(v);
}

/* --- retries ------------------------------------------------------------------------------ */

static void test_retry__reads_retry_5xx_writes_do_not(void **state)
{
        struct fx *f = *state;
        cJSON *o = cm("r", "1");

        make_ns(f->c, "retry");
        kubesim_faults(&sim, "{\"errorRate\":1,\"errorCode\":500}");
        assert_int_equal(kube_get(f->c, &KUBE_RES_CONFIGMAPS, "retry", "r", NULL, &f->e),
                         CM_ESERVER);
        assert_int_equal(f->e.http_status, 500);
        assert_int_equal(sim_count("GET", "/namespaces/retry/configmaps/r", NULL, false), 4);
        assert_int_equal(f->n_slept, 3);
        assert_true(f->slept[0] >= 50 && f->slept[2] >= f->slept[0]);
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "retry", o, NULL, &f->e),
                         CM_ESERVER);
        assert_int_equal(sim_count("POST", "/namespaces/retry/configmaps", NULL, false), 1);
        assert_int_equal(f->n_slept, 3);
        cJSON_Delete(o);
}

static void test_retry__429_retries_writes_after_the_servers_delay(void **state)
{
        struct fx *f = *state;
        cJSON *o = cm("r429", "1");

        make_ns(f->c, "retry429");
        kubesim_faults(&sim, "{\"errorRate\":1,\"errorCode\":429}");
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "retry429", o, NULL, &f->e),
                         CM_ESERVER);
        assert_int_equal(f->e.http_status, 429);
        assert_int_equal(sim_count("POST", "/namespaces/retry429/configmaps", NULL, false), 4);
        assert_int_equal(f->n_slept, 3);
        assert_int_equal(f->slept[0], 1000); /* details.retryAfterSeconds */
        kubesim_faults(&sim, "{\"errorRate\":0}");
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "retry429", o, NULL, &f->e), 0);
        cJSON_Delete(o);
}

/* --- rate limiter --------------------------------------------------------------------------- */

static void test_ratelimit__burst_then_qps_on_a_fake_clock(void **state)
{
        struct clock_fake fc;
        struct kube_ratelimit *rl = NULL;

        (void)state;
        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(kube_ratelimit_new(10, 3, &fc.ops, &rl), 0);
        for (int i = 0; i < 3; i++)
                assert_int_equal(kube_ratelimit_reserve(rl), 0);
        assert_int_equal(kube_ratelimit_reserve(rl), 100); /* 1/qps later */
        assert_int_equal(kube_ratelimit_reserve(rl), 200); /* queued behind the previous */
        clock_fake_advance(&fc, 200);                      /* pays the two back */
        assert_int_equal(kube_ratelimit_reserve(rl), 100);
        clock_fake_advance(&fc, 10000); /* refills to burst, not beyond */
        for (int i = 0; i < 3; i++)
                assert_int_equal(kube_ratelimit_wait(rl), 0);
        assert_int_equal(kube_ratelimit_reserve(rl), 100);
        rl = kube_ratelimit_free(rl);
        assert_int_equal(kube_ratelimit_new(0, 1, &fc.ops, &rl), 0); /* unlimited */
        for (int i = 0; i < 100; i++)
                assert_int_equal(kube_ratelimit_reserve(rl), 0);
        kube_ratelimit_free(rl);
}

static void test_ratelimit__every_request_takes_a_token(void **state)
{
        struct fx *f = *state;
        struct clock_fake fc;
        struct kube_ratelimit *rl = NULL;
        struct kube_client *c = NULL;

        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(kube_ratelimit_new(1, 2, &fc.ops, &rl), 0);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &sim.cfg, .limiter = rl },
                                &c),
                0);
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e), 0);
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e), 0);
        assert_int_equal(kube_ratelimit_reserve(rl), 1000); /* the burst is spent */
        kube_client_free(c);
        kube_ratelimit_free(rl);
}

struct reserver {
        struct kube_ratelimit *rl;
        uint64_t waits[25];
};

static void *reserve_thread(void *arg)
{
        struct reserver *r = arg;

        for (size_t i = 0; i < ARRAY_SIZE(r->waits); i++)
                r->waits[i] = kube_ratelimit_reserve(r->rl);
        return NULL;
}

static void test_ratelimit__concurrent_callers_each_get_their_own_slot(void **state)
{
        struct clock_fake fc;
        struct kube_ratelimit *rl = NULL;
        struct reserver r[4];
        pthread_t th[4];
        bool seen[101] = { false };

        (void)state;
        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(kube_ratelimit_new(10, 10, &fc.ops, &rl), 0);
        for (int i = 0; i < 4; i++) {
                r[i].rl = rl;
                assert_int_equal(pthread_create(&th[i], NULL, reserve_thread, &r[i]), 0);
        }
        for (int i = 0; i < 4; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        /* 100 reservations, the clock frozen: 10 free, then one every 100 ms, none shared */
        for (int i = 0; i < 4; i++) {
                for (size_t j = 0; j < 25; j++) {
                        uint64_t slot = r[i].waits[j] / 100;

                        assert_int_equal(r[i].waits[j] % 100, 0);
                        assert_true(slot <= 90);
                        if (slot > 0) {
                                assert_false(seen[slot]);
                                seen[slot] = true;
                        }
                }
        }
        for (int s = 1; s <= 90; s++)
                assert_true(seen[s]);
        kube_ratelimit_free(rl);
}

static void test_client__unreadable_client_certificate_is_invalid(void **state)
{
        char crt[] = "/nonexistent/client.crt", key[] = "/nonexistent/client.key";
        struct kube_config cfg = { .server = sim.proc.url,
                                   .client_cert_file = crt,
                                   .client_key_file = key };
        struct kube_config noserver = { 0 };
        struct kube_client *c = NULL;

        (void)state;
        assert_int_equal(kube_client_new(&(struct kube_client_opts){ .config = &cfg }, &c),
                         CM_EINVAL);
        assert_int_equal(kube_client_new(&(struct kube_client_opts){ .config = &noserver }, &c),
                         CM_EINVAL);
        assert_null(c);
}

/* --- watch -------------------------------------------------------------------------------- */

struct seen {
        enum kube_watch_event type[16];
        char name[16][32];
        size_t n;
        atomic_int added;
};

static int on_event(void *arg, enum kube_watch_event type, cJSON *obj)
{
        struct seen *s = arg;
        const char *name = kube_meta_str(obj, "name");

        if (s->n < 16) {
                s->type[s->n] = type;
                snprintf(s->name[s->n], sizeof(s->name[0]), "%s", name ? name : "");
                s->n++;
        }
        if (type == KUBE_WATCH_ADDED)
                atomic_fetch_add(&s->added, 1);
        cJSON_Delete(obj);
        return type == KUBE_WATCH_BOOKMARK; /* the test is done at the first bookmark */
}

static void test_watch__events_in_order_from_a_resource_version(void **state)
{
        struct fx *f = *state;
        struct seen s = { 0 };
        char *rv0;

        make_ns(f->c, "watch");
        rv0 = create_cm(f->c, "watch", "before", "0");
        free(create_cm(f->c, "watch", "w", "1"));
        assert_int_equal(kube_patch(f->c,
                                    &(struct kube_patch_opts){ .resource = &KUBE_RES_CONFIGMAPS,
                                                               .ns = "watch",
                                                               .name = "w",
                                                               .subresource = NULL,
                                                               .type = KUBE_PATCH_MERGE,
                                                               .body = "{\"data\":{\"k\":\"2\"}}" },
                                    NULL, &f->e),
                         0);
        assert_int_equal(kube_delete(f->c, &KUBE_RES_CONFIGMAPS, "watch", "w", NULL, &f->e), 0);
        assert_int_equal(kube_watch(f->c, &KUBE_RES_CONFIGMAPS, "watch",
                                    &(struct kube_watch_opts){ .resource_version = rv0,
                                                               .timeout_seconds = 10 },
                                    on_event, &s, &f->e),
                         0);
        assert_int_equal(s.n, 4);
        assert_int_equal(s.type[0], KUBE_WATCH_ADDED);
        assert_int_equal(s.type[1], KUBE_WATCH_MODIFIED);
        assert_int_equal(s.type[2], KUBE_WATCH_DELETED);
        assert_int_equal(s.type[3], KUBE_WATCH_BOOKMARK);
        assert_string_equal(s.name[0], "w");
        assert_string_equal(s.name[2], "w");
        assert_int_equal(
                sim_count("GET", "/namespaces/watch/configmaps", "allowWatchBookmarks", true), 1);
        free(rv0);
}

static void test_watch__too_old_resource_version_is_gone(void **state)
{
        struct fx *f = *state;
        struct seen s = { 0 };
        char *rv0;

        make_ns(f->c, "expired");
        rv0 = create_cm(f->c, "expired", "e", "1");
        churn(f->c, HISTORY + 5);
        assert_int_equal(kube_watch(f->c, &KUBE_RES_CONFIGMAPS, "expired",
                                    &(struct kube_watch_opts){ .resource_version = rv0,
                                                               .timeout_seconds = 10 },
                                    on_event, &s, &f->e),
                         CM_EGONE);
        assert_int_equal(f->e.http_status, 410);
        assert_string_equal(f->e.reason, "Expired");
        assert_non_null(strstr(f->e.message, "too old resource version"));
        assert_int_equal(s.n, 0);
        /* the sim's fault switch gives the same answer for a fresh version */
        kubesim_faults(&sim, "{\"expireNextWatch\":true}");
        free(rv0);
        rv0 = create_cm(f->c, "expired", "e2", "1");
        assert_int_equal(kube_watch(f->c, &KUBE_RES_CONFIGMAPS, "expired",
                                    &(struct kube_watch_opts){ .resource_version = rv0,
                                                               .timeout_seconds = 10 },
                                    on_event, &s, &f->e),
                         CM_EGONE);
        free(rv0);
}

static void test_watch__event_over_max_event_is_too_big(void **state)
{
        struct fx *f = *state;
        struct seen s = { 0 };
        char *v = big_value(2048);

        make_ns(f->c, "bigwatch");
        free(create_cm(f->c, "bigwatch", "small", "1"));
        free(create_cm(f->c, "bigwatch", "zbig", v));
        assert_int_equal(
                kube_watch(f->c, &KUBE_RES_CONFIGMAPS, "bigwatch",
                           &(struct kube_watch_opts){ .max_event = 1024, .timeout_seconds = 10 },
                           on_event, &s, &f->e),
                CM_ETOOBIG);
        assert_int_equal(s.n, 1); /* the small one came through first */
        free(v);
}

/* Records like on_event but never ends the watch itself (bookmarks come every 0.2 s). */
static int on_event_go_on(void *arg, enum kube_watch_event type, cJSON *obj)
{
        (void)on_event(arg, type, obj);
        return 0;
}

struct watcher {
        struct kube_client *c;
        const char *ns;
        atomic_bool stop;
        struct seen seen;
        struct kube_error e;
        int result;
        pthread_t th;
};

static void *watch_thread(void *arg)
{
        struct watcher *w = arg;

        w->result = kube_watch(w->c, &KUBE_RES_CONFIGMAPS, w->ns,
                               &(struct kube_watch_opts){ .timeout_seconds = 60, .stop = &w->stop },
                               on_event_go_on, &w->seen, &w->e);
        return NULL;
}

/* Starts a watch of ns (holding one object) on a thread; returns once it streams. */
static void watcher_start(struct fx *f, struct watcher *w, const char *ns)
{
        struct timespec ts = { 0, 10 * 1000000L };

        make_ns(f->c, ns);
        free(create_cm(f->c, ns, "s", "1"));
        w->ns = ns;
        w->c = new_client(f, &sim.cfg, 0);
        assert_int_equal(pthread_create(&w->th, NULL, watch_thread, w), 0);
        for (int i = 0; i < 1000 && atomic_load(&w->seen.added) == 0; i++) /* ≤ 10 s */
                nanosleep(&ts, NULL);
        assert_int_equal(atomic_load(&w->seen.added), 1); /* the synthetic ADDED arrived */
}

/* Joins the watch thread, failing if it does not end within 10 s: far below the 60 s the
 * server would keep the stream open. */
static int watcher_join(struct watcher *w)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10;
        assert_int_equal(pthread_timedjoin_np(w->th, NULL, &ts), 0);
        kube_error_release(&w->e);
        kube_client_free(w->c);
        return w->result;
}

static void test_watch__stop_flag_ends_a_quiet_watch(void **state)
{
        struct watcher w = { 0 };

        watcher_start(*state, &w, "stop");
        atomic_store(&w.stop, true);
        assert_int_equal(watcher_join(&w), 0);
}

static void test_watch__server_closing_the_stream_ends_the_watch(void **state)
{
        struct watcher w = { 0 };

        watcher_start(*state, &w, "drop");
        kubesim_faults(&sim, "{\"dropWatches\":true}");
        assert_int_equal(watcher_join(&w), 0);
        assert_false(atomic_load(&w.stop));
}

/* --- list restart after an expired continue token -------------------------------------------- */

static struct kube_client *g_churner;
static int g_clock_calls;

/* A clock that churns the event history the third time the limiter reads it: between the
 * first and the second page of a list. */
static uint64_t churning_now(const struct clock_ops *c)
{
        (void)c;
        if (++g_clock_calls == 3)
                churn(g_churner, HISTORY + 5);
        return 1000;
}

static int64_t churning_wall(const struct clock_ops *c)
{
        (void)c;
        return 1700000000;
}

static void test_list__expired_continue_restarts_the_list_once(void **state)
{
        struct fx *f = *state;
        static const struct clock_ops churning = { churning_now, churning_wall };
        struct kube_ratelimit *rl = NULL;
        struct kube_client *c = NULL;
        struct pages p = { 0 };
        cJSON *list = NULL;
        char name[16];

        make_ns(f->c, "relist");
        for (int i = 0; i < 5; i++) {
                snprintf(name, sizeof(name), "r-%d", i);
                free(create_cm(f->c, "relist", name, "v"));
        }
        g_churner = f->c;
        g_clock_calls = 0;
        assert_int_equal(kube_ratelimit_new(1e6, 1000, &churning, &rl), 0);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &sim.cfg, .limiter = rl },
                                &c),
                0);
        assert_int_equal(kube_list(c, &KUBE_RES_CONFIGMAPS, "relist",
                                   &(struct kube_list_opts){ .page_size = 2 }, &list, &f->e),
                         0);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "items")), 5);
        assert_int_equal(sim_count("GET", "/namespaces/relist/configmaps", "continue", false), 2);
        cJSON_Delete(list);
        /* page by page, the restart is flagged so the receiver drops what it had */
        g_clock_calls = 0;
        assert_int_equal(kube_list_pages(c, &KUBE_RES_CONFIGMAPS, "relist",
                                         &(struct kube_list_opts){ .page_size = 2 }, record_page,
                                         &p, &f->e),
                         0);
        assert_int_equal(p.restarts, 1);
        assert_int_equal(p.firsts, 2);
        assert_int_equal(p.items, 5);
        kube_client_free(c);
        kube_ratelimit_free(rl);
}

/* --- authentication ----------------------------------------------------------------------- */

static void write_token(const char *path, const char *tok)
{
        char *tmp = xasprintf("%s.new", path);
        FILE *fp = fopen(tmp, "w");

        assert_non_null(fp);
        fprintf(fp, "%s\n", tok);
        assert_int_equal(fclose(fp), 0);
        assert_int_equal(rename(tmp, path), 0); /* as the kubelet does: a new inode */
        free(tmp);
}

static void test_in_cluster__token_file_is_reread_when_it_changes(void **state)
{
        struct fx *f = *state;
        char sa[256], port[16];
        const char *colon = strrchr(sim.proc.url, ':');
        char *host = xasprintf("KUBERNETES_SERVICE_HOST=127.0.0.1");
        char *portenv = NULL, *tok;
        char *envp[] = { host, NULL, NULL };
        struct kube_config cfg = { 0 };
        struct kube_client *c;
        char *err = NULL;

        snprintf(port, sizeof(port), "%s", colon + 1);
        portenv = xasprintf("KUBERNETES_SERVICE_PORT=%s", port);
        envp[1] = portenv;
        test_mkdtemp(sa, sizeof(sa));
        assert_int_equal(test_sh("cp '%s/ca.crt' '%s/ca.crt'", sim.dir, sa), 0);
        tok = xasprintf("%s/token", sa);
        write_token(tok, "wrong-token");
        assert_int_equal(kube_config_in_cluster(sa, envp, &cfg, &err), 0);
        c = new_client(f, &cfg, 0);
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e),
                         CM_EUNAUTHORIZED);
        assert_int_equal(f->e.http_status, 401);
        assert_null(strstr(f->e.message, "wrong-token"));
        write_token(tok, sim.cfg.token); /* rotation */
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e), 0);
        write_token(tok, "rotated-away");
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e),
                         CM_EUNAUTHORIZED);
        kube_client_free(c);
        kube_config_release(&cfg);
        (void)test_sh("rm -rf '%s'", sa);
        free(tok);
        free(host);
        free(portenv);
}

static void test_tls__unknown_ca_is_a_transport_error(void **state)
{
        struct fx *f = *state;
        struct kube_config cfg = { .server = sim.proc.url, .token = sim.cfg.token };
        struct kube_client *c = new_client(f, &cfg, 0);

        /* system CAs do not know kube-sim's CA */
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e),
                         CM_ETRANSPORT);
        assert_int_equal(f->e.http_status, 0);
        assert_non_null(f->e.message);
        assert_int_equal(f->n_slept, 3); /* a read: retried */
        kube_client_free(c);
        cfg.insecure_skip_verify = true;
        c = new_client(f, &cfg, 0);
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e), 0);
        kube_client_free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
                T(test_get__object_over_tls_and_not_found),
                T(test_list__follows_continue_across_pages),
                T(test_list__pages_are_handed_over_one_at_a_time),
                T(test_create__already_exists_and_invalid_with_causes),
                T(test_update__stale_resource_version_conflicts),
                T(test_patch__merge_json_and_apply),
                T(test_status__subresource_update_and_patch_on_a_custom_resource),
                T(test_delete__uid_precondition_and_not_found),
                T(test_body_cap__oversized_response_is_too_big),
                T(test_retry__reads_retry_5xx_writes_do_not),
                T(test_retry__429_retries_writes_after_the_servers_delay),
                cmocka_unit_test(test_ratelimit__burst_then_qps_on_a_fake_clock),
                T(test_ratelimit__every_request_takes_a_token),
                cmocka_unit_test(test_ratelimit__concurrent_callers_each_get_their_own_slot),
                cmocka_unit_test(test_client__unreadable_client_certificate_is_invalid),
                T(test_watch__events_in_order_from_a_resource_version),
                T(test_watch__too_old_resource_version_is_gone),
                T(test_watch__event_over_max_event_is_too_big),
                T(test_watch__stop_flag_ends_a_quiet_watch),
                T(test_watch__server_closing_the_stream_ends_the_watch),
                T(test_list__expired_continue_restarts_the_list_once),
                T(test_in_cluster__token_file_is_reread_when_it_changes),
                T(test_tls__unknown_ca_is_a_transport_error),
#undef T
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
