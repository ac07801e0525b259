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
#include "kube_client_fixture.h"
#include "kubesim.h"
#include "testutil.h"
#include "token_bucket.h"
#include "xalloc.h"

/* --- helpers ---------------------------------------------------------------------------- */

/* Creates namespace ns and n ConfigMaps <prefix>-0 .. <prefix>-(n-1) in it. */
static void create_cms(struct kc_fx *f, const char *ns, const char *prefix, int n)
{
        char name[16];

        kubesim_create_namespace(f->c, ns);
        for (int i = 0; i < n; i++) {
                snprintf(name, sizeof(name), "%s-%d", prefix, i);
                free(kc_create_cm(f->c, ns, name, "v"));
        }
}

/* kube_patch of `to` (its resource, ns, name and subresource) with this type and body. */
static int patch(struct kc_fx *f,
                 struct kube_patch_opts to,
                 enum kube_patch_type type,
                 const char *body,
                 cJSON **got)
{
        to.type = type;
        to.body = body;
        return kube_patch(f->c, &to, got, &f->e);
}

/* A client of kc_sim's cfg whose requests take tokens from rl. */
static struct kube_client *limited_client(struct token_bucket *rl)
{
        struct kube_client *c = NULL;

        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &kc_sim.cfg, .limiter = rl },
                                &c),
                0);
        return c;
}

/* --- verbs ------------------------------------------------------------------------------ */

static void test_get__object_over_tls_and_not_found(void **state)
{
        struct kc_fx *f = *state;
        cJSON *got = NULL;
        char *rv;

        kubesim_create_namespace(f->c, "get");
        rv = kc_create_cm(f->c, "get", "a", "1");
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
        struct kc_fx *f = *state;
        cJSON *list = NULL;

        create_cms(f, "list", "cm", 7);
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
        assert_int_equal(kc_count("GET", "/namespaces/list/configmaps", "continue", false), 1);
        assert_int_equal(kc_count("GET", "/namespaces/list/configmaps", "continue", true), 3);
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

/* kube_list_pages of c's ConfigMaps in ns, two a page, recorded into p. */
static int list_pages(struct kc_fx *f, struct kube_client *c, const char *ns, struct pages *p)
{
        return kube_list_pages(c, &KUBE_RES_CONFIGMAPS, ns,
                               &(struct kube_list_opts){ .page_size = 2 }, record_page, p, &f->e);
}

/* An informer's relist holds one page at a time: each page is handed over as it arrives;
 * a nonzero answer stops the list there. */
static void test_list__pages_are_handed_over_one_at_a_time(void **state)
{
        struct kc_fx *f = *state;
        struct pages p = { 0 };

        create_cms(f, "pages", "cm", 7);
        assert_int_equal(list_pages(f, f->c, "pages", &p), 0);
        assert_int_equal(p.n, 4);
        assert_int_equal(p.firsts, 1);
        assert_int_equal(p.restarts, 0);
        assert_int_equal(p.items, 7);
        assert_int_equal(p.max_items, 2);
        p = (struct pages){ .stop_at = 2 };
        assert_int_equal(list_pages(f, f->c, "pages", &p), 7);
        assert_int_equal(p.n, 2);
}

static void test_create__already_exists_and_invalid_with_causes(void **state)
{
        struct kc_fx *f = *state;
        cJSON *o = kc_cm("dup", "1"), *noname = kc_cm(NULL, "1");
        const cJSON *cause;

        kubesim_create_namespace(f->c, "create");
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
        struct kc_fx *f = *state;
        const struct kube_update_opts cm_u = { &KUBE_RES_CONFIGMAPS, "update", "u", NULL };
        cJSON *o = NULL, *stale, *got = NULL;

        kubesim_create_namespace(f->c, "update");
        free(kc_create_cm(f->c, "update", "u", "1"));
        assert_int_equal(kube_get(f->c, &KUBE_RES_CONFIGMAPS, "update", "u", &o, &f->e), 0);
        stale = cJSON_Duplicate(o, true);
        cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "data"), "k",
                                               cJSON_CreateString("2"));
        assert_int_equal(kube_update(f->c, &cm_u, o, &got, &f->e), 0);
        assert_string_not_equal(kube_meta_str(got, "resourceVersion"),
                                kube_meta_str(stale, "resourceVersion"));
        assert_int_equal(kube_update(f->c, &cm_u, stale, NULL, &f->e), CM_ECONFLICT);
        assert_string_equal(f->e.reason, "Conflict");
        cJSON_Delete(o);
        cJSON_Delete(stale);
        cJSON_Delete(got);
}

static void test_patch__merge_json_and_apply(void **state)
{
        struct kc_fx *f = *state;
        const struct kube_patch_opts p = { .resource = &KUBE_RES_CONFIGMAPS,
                                           .ns = "patch",
                                           .name = "p" };
        cJSON *got = NULL;

        kubesim_create_namespace(f->c, "patch");
        free(kc_create_cm(f->c, "patch", "p", "1"));
        assert_int_equal(patch(f, p, KUBE_PATCH_MERGE,
                               "{\"metadata\":{\"labels\":{\"merged\":\"yes\"}}}", &got),
                         0);
        assert_string_equal(kube_label(got, "merged"), "yes");
        assert_string_equal(kube_label(got, "app"), "t");
        cJSON_Delete(got);
        assert_int_equal(patch(f, p, KUBE_PATCH_JSON,
                               "[{\"op\":\"replace\",\"path\":\"/data/k\",\"value\":\"j\"},"
                               "{\"op\":\"remove\",\"path\":\"/metadata/labels/app\"}]",
                               &got),
                         0);
        assert_null(kube_label(got, "app"));
        assert_string_equal(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(got, "data"), "k")
                        ->valuestring,
                "j");
        cJSON_Delete(got);
        assert_int_equal(patch(f, p, KUBE_PATCH_APPLY,
                               "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                               "{\"name\":\"p\",\"annotations\":{\"applied\":\"1\"}}}",
                               &got),
                         0);
        assert_string_equal(kube_annotation(got, "applied"), "1");
        cJSON_Delete(got);
        assert_int_equal(kc_count("PATCH", "/configmaps/p", "force", true), 1);
        assert_int_equal(patch(f, p, KUBE_PATCH_JSON,
                               "[{\"op\":\"test\",\"path\":\"/data/k\",\"value\":\"other\"}]",
                               NULL),
                         CM_EINVAL);
}

static void test_status__subresource_update_and_patch_on_a_custom_resource(void **state)
{
        struct kc_fx *f = *state;
        cJSON *o = cJSON_Parse("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                               "\"kind\":\"MaasCluster\",\"metadata\":{\"name\":\"mc\"},"
                               "\"spec\":{\"dnsDomain\":\"maas.test\"}}");
        const struct kube_patch_opts mc = { .resource = &KUBE_RES_MAASCLUSTERS,
                                            .ns = "status",
                                            .name = "mc" };
        struct kube_patch_opts mc_status = mc;
        const struct kube_update_opts put_status = { &KUBE_RES_MAASCLUSTERS, "status", "mc",
                                                     "status" };
        cJSON *got = NULL, *st;

        mc_status.subresource = "status";
        kubesim_create_namespace(f->c, "status");
        assert_int_equal(kube_create(f->c, &KUBE_RES_MAASCLUSTERS, "status", o, &got, &f->e), 0);
        st = cJSON_AddObjectToObject(got, "status");
        cJSON_AddBoolToObject(st, "ready", true);
        cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(got, "spec"),
                                               "dnsDomain", cJSON_CreateString("ignored.test"));
        cJSON_Delete(o);
        o = got;
        got = NULL;
        assert_int_equal(kube_update(f->c, &put_status, o, &got, &f->e), 0);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(got, "status"), "ready")));
        assert_string_equal(cJSON_GetObjectItemCaseSensitive(
                                    cJSON_GetObjectItemCaseSensitive(got, "spec"), "dnsDomain")
                                    ->valuestring,
                            "maas.test"); /* /status keeps the spec */
        cJSON_Delete(got);
        assert_int_equal(patch(f, mc_status, KUBE_PATCH_MERGE,
                               "{\"status\":{\"network\":{\"dnsName\":\"mc.maas.test\"}}}", &got),
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
        assert_int_equal(patch(f, mc, KUBE_PATCH_STRATEGIC, "{}", NULL), CM_EUNSUPPORTED);
        assert_int_equal(f->e.http_status, 415);
        /* schema validation: causes are copied */
        assert_int_equal(patch(f, mc, KUBE_PATCH_MERGE, "{\"spec\":{\"dnsDomain\":\"\"}}", NULL),
                         CM_EINVAL);
        assert_string_equal(f->e.reason, "Invalid");
        assert_true(cJSON_GetArraySize(f->e.causes) >= 1);
        cJSON_Delete(o);
}

static void test_delete__uid_precondition_and_not_found(void **state)
{
        struct kc_fx *f = *state;
        cJSON *got = NULL;

        kubesim_create_namespace(f->c, "delete");
        free(kc_create_cm(f->c, "delete", "d", "1"));
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
        struct kc_fx *f = *state;
        struct kube_client *small = kc_new_client(f, &kc_sim.cfg, 1024);
        char *v = kc_big_value(4096);
        cJSON *got = NULL;

        kubesim_create_namespace(f->c, "cap");
        free(kc_create_cm(f->c, "cap", "big", v));
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
        struct kc_fx *f = *state;
        cJSON *o = kc_cm("r", "1");

        kubesim_create_namespace(f->c, "retry");
        kubesim_faults(&kc_sim, "{\"errorRate\":1,\"errorCode\":500}");
        assert_int_equal(kube_get(f->c, &KUBE_RES_CONFIGMAPS, "retry", "r", NULL, &f->e),
                         CM_ESERVER);
        assert_int_equal(f->e.http_status, 500);
        assert_int_equal(kc_count("GET", "/namespaces/retry/configmaps/r", NULL, false), 4);
        assert_int_equal(f->n_slept, 3);
        assert_true(f->slept[0] >= 50 && f->slept[2] >= f->slept[0]);
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "retry", o, NULL, &f->e),
                         CM_ESERVER);
        assert_int_equal(kc_count("POST", "/namespaces/retry/configmaps", NULL, false), 1);
        assert_int_equal(f->n_slept, 3);
        cJSON_Delete(o);
}

static void test_retry__429_retries_writes_after_the_servers_delay(void **state)
{
        struct kc_fx *f = *state;
        cJSON *o = kc_cm("r429", "1");

        kubesim_create_namespace(f->c, "retry429");
        kubesim_faults(&kc_sim, "{\"errorRate\":1,\"errorCode\":429}");
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "retry429", o, NULL, &f->e),
                         CM_ESERVER);
        assert_int_equal(f->e.http_status, 429);
        assert_int_equal(kc_count("POST", "/namespaces/retry429/configmaps", NULL, false), 4);
        assert_int_equal(f->n_slept, 3);
        assert_int_equal(f->slept[0], 1000); /* details.retryAfterSeconds */
        kubesim_faults(&kc_sim, "{\"errorRate\":0}");
        assert_int_equal(kube_create(f->c, &KUBE_RES_CONFIGMAPS, "retry429", o, NULL, &f->e), 0);
        cJSON_Delete(o);
}

/* --- rate limiter --------------------------------------------------------------------------- */

static void test_ratelimit__every_request_takes_a_token(void **state)
{
        struct kc_fx *f = *state;
        struct clock_fake fc;
        struct token_bucket *rl = NULL;
        struct kube_client *c;

        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(token_bucket_new(1, 2, &fc.ops, &rl), 0);
        c = limited_client(rl);
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e), 0);
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e), 0);
        assert_int_equal(token_bucket_reserve(rl), 1000); /* the burst is spent */
        kube_client_free(c);
        token_bucket_free(rl);
}

struct reserver {
        struct token_bucket *rl;
        uint64_t waits[25];
};

static void *reserve_thread(void *arg)
{
        struct reserver *r = arg;

        for (size_t i = 0; i < ARRAY_SIZE(r->waits); i++)
                r->waits[i] = token_bucket_reserve(r->rl);
        return NULL;
}

static void test_ratelimit__concurrent_callers_each_get_their_own_slot(void **state)
{
        struct clock_fake fc;
        struct token_bucket *rl = NULL;
        struct reserver r[4];
        pthread_t th[4];
        bool seen[101] = { false };

        (void)state;
        clock_fake_init(&fc, 1000, 1700000000);
        assert_int_equal(token_bucket_new(10, 10, &fc.ops, &rl), 0);
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
        token_bucket_free(rl);
}

static void test_client__unreadable_client_certificate_is_invalid(void **state)
{
        char crt[] = "/nonexistent/client.crt", key[] = "/nonexistent/client.key";
        struct kube_config cfg = { .server = kc_sim.proc.url,
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

/* --- list restart after an expired continue token -------------------------------------------- */

static struct kube_client *g_churner;
static int g_clock_calls;

/* A clock that churns the event history the third time the limiter reads it: between the
 * first and the second page of a list. */
static uint64_t churning_now(const struct clock_ops *c)
{
        (void)c;
        if (++g_clock_calls == 3)
                kc_churn(g_churner, KC_HISTORY + 5);
        return 1000;
}

static int64_t churning_wall(const struct clock_ops *c)
{
        (void)c;
        return 1700000000;
}

static void test_list__expired_continue_restarts_the_list_once(void **state)
{
        struct kc_fx *f = *state;
        static const struct clock_ops churning = { churning_now, churning_wall };
        struct token_bucket *rl = NULL;
        struct kube_client *c;
        struct pages p = { 0 };
        cJSON *list = NULL;

        create_cms(f, "relist", "r", 5);
        g_churner = f->c;
        g_clock_calls = 0;
        assert_int_equal(token_bucket_new(1e6, 1000, &churning, &rl), 0);
        c = limited_client(rl);
        assert_int_equal(kube_list(c, &KUBE_RES_CONFIGMAPS, "relist",
                                   &(struct kube_list_opts){ .page_size = 2 }, &list, &f->e),
                         0);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "items")), 5);
        assert_int_equal(kc_count("GET", "/namespaces/relist/configmaps", "continue", false), 2);
        cJSON_Delete(list);
        /* page by page, the restart is flagged so the receiver drops what it had */
        g_clock_calls = 0;
        assert_int_equal(list_pages(f, c, "relist", &p), 0);
        assert_int_equal(p.restarts, 1);
        assert_int_equal(p.firsts, 2);
        assert_int_equal(p.items, 5);
        kube_client_free(c);
        token_bucket_free(rl);
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
        struct kc_fx *f = *state;
        char sa[256], port[16];
        const char *colon = strrchr(kc_sim.proc.url, ':');
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
        assert_int_equal(test_sh("cp '%s/ca.crt' '%s/ca.crt'", kc_sim.dir, sa), 0);
        tok = xasprintf("%s/token", sa);
        write_token(tok, "wrong-token");
        assert_int_equal(kube_config_in_cluster(sa, envp, &cfg, &err), 0);
        c = kc_new_client(f, &cfg, 0);
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e),
                         CM_EUNAUTHORIZED);
        assert_int_equal(f->e.http_status, 401);
        assert_null(strstr(f->e.message, "wrong-token"));
        write_token(tok, kc_sim.cfg.token); /* rotation */
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
        struct kc_fx *f = *state;
        struct kube_config cfg = { .server = kc_sim.proc.url, .token = kc_sim.cfg.token };
        struct kube_client *c = kc_new_client(f, &cfg, 0);

        /* system CAs do not know kube-sim's CA */
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e),
                         CM_ETRANSPORT);
        assert_int_equal(f->e.http_status, 0);
        assert_non_null(f->e.message);
        assert_int_equal(f->n_slept, 3); /* a read: retried */
        kube_client_free(c);
        cfg.insecure_skip_verify = true;
        c = kc_new_client(f, &cfg, 0);
        assert_int_equal(kube_get(c, &KUBE_RES_NAMESPACES, NULL, "churn", NULL, &f->e), 0);
        kube_client_free(c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, kc_setup, kc_teardown)
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
                T(test_ratelimit__every_request_takes_a_token),
                cmocka_unit_test(test_ratelimit__concurrent_callers_each_get_their_own_slot),
                cmocka_unit_test(test_client__unreadable_client_certificate_is_invalid),
                T(test_list__expired_continue_restarts_the_list_once),
                T(test_in_cluster__token_file_is_reread_when_it_changes),
                T(test_tls__unknown_ca_is_a_transport_error),
#undef T
        };

        return cmocka_run_group_tests(tests, kc_group_setup, kc_group_teardown);
}
