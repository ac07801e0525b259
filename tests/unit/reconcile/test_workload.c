/*
 * Unit tests for the workload clients a worker keeps (reconciler_workload_client): a fleet
 * of machines in one cluster reads the cluster's kubeconfig Secret once per 30 s and
 * shares one client (one TLS connection), a changed Secret (rotated credentials, a new
 * endpoint) gives a new client, a failed call forgets the client, and a missing Secret is
 * CM_ENOTFOUND.
 */
#include "../../../reconcile/reconciler.h"
#include "base64.h"
#include "reconcile_world.h"

#define SECRET_PART "/secrets/c1-kubeconfig"

static void put_kubeconfig_server(struct world *w, const char *server)
{
        char yaml[512], *b64;

        (void)snprintf(yaml, sizeof(yaml),
                       "apiVersion: v1\nkind: Config\n"
                       "clusters:\n- name: w\n  cluster:\n    server: %s\n"
                       "    insecure-skip-tls-verify: true\n"
                       "contexts:\n- name: w\n  context:\n    cluster: w\n    user: u\n"
                       "current-context: w\n"
                       "users:\n- name: u\n  user:\n    token: rotated-token\n",
                       server);
        b64 = base64_encode(yaml, strlen(yaml));
        world_put(w, NULL, CORE_API SECRET_PART,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"c1-kubeconfig\",\"namespace\":\"" NS "\"},\"data\":{\"value\":"
                            "\"%s\"}}",
                            b64));
        free(b64);
}

/* A GET of kube-system through wl: which server it went to shows which kubeconfig built it. */
static bool went_to(struct world *w, struct kube_client *wl, const char *server)
{
        cJSON *ns = NULL;
        size_t before = requests(&w->kube, "GET", server, NULL);

        /* not found or found: the request was made either way */
        int err = kube_get(wl, &KUBE_RES_NAMESPACES, NULL, "kube-system", &ns, NULL);

        (void)err;
        cJSON_Delete(ns);
        return requests(&w->kube, "GET", server, NULL) == before + 1;
}

static void test_workload__one_secret_read_and_client_for_a_fleet(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        struct kube_client *a = NULL, *b = NULL;

        (void)state;
        world_put_kubeconfig(w, "c1");
        for (int i = 0; i < 50; i++) {
                assert_int_equal(reconciler_workload_client(w->w, NS, "c1", &b), 0);
                if (i == 0)
                        a = b;
                assert_ptr_equal(a, b);
        }
        assert_int_equal(requests(&w->kube, "GET", SECRET_PART, NULL), 1);
        assert_true(went_to(w, a, WORKLOAD));

        /* 30 s on, the Secret is read again; unchanged, the client stays */
        clock_fake_advance(&w->clock, 30001);
        assert_int_equal(reconciler_workload_client(w->w, NS, "c1", &b), 0);
        assert_ptr_equal(a, b);
        assert_int_equal(requests(&w->kube, "GET", SECRET_PART, NULL), 2);
        world_free(w);
}

static void test_workload__a_changed_secret_builds_a_new_client(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        struct kube_client *wl = NULL;

        (void)state;
        world_put_kubeconfig(w, "c1");
        assert_int_equal(reconciler_workload_client(w->w, NS, "c1", &wl), 0);
        assert_true(went_to(w, wl, WORKLOAD));

        put_kubeconfig_server(w, "https://moved.test:6443");
        /* within 30 s the kept client is used as it is */
        assert_int_equal(reconciler_workload_client(w->w, NS, "c1", &wl), 0);
        assert_true(went_to(w, wl, WORKLOAD));
        clock_fake_advance(&w->clock, 30001);
        assert_int_equal(reconciler_workload_client(w->w, NS, "c1", &wl), 0);
        assert_true(went_to(w, wl, "https://moved.test:6443"));
        world_free(w);
}

static void test_workload__a_failed_call_forgets_the_client(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        struct kube_client *wl = NULL;

        (void)state;
        world_put_kubeconfig(w, "c1");
        assert_int_equal(reconciler_workload_client(w->w, NS, "c1", &wl), 0);
        put_kubeconfig_server(w, "https://moved.test:6443");
        reconciler_workload_drop(w->w, NS, "c1");
        assert_int_equal(reconciler_workload_client(w->w, NS, "c1", &wl), 0);
        assert_int_equal(requests(&w->kube, "GET", SECRET_PART, NULL), 2);
        assert_true(went_to(w, wl, "https://moved.test:6443"));

        /* no Secret: not found, and nothing kept */
        assert_int_equal(reconciler_workload_client(w->w, NS, "c2", &wl), CM_ENOTFOUND);
        world_free(w);
}

/* More clusters than a worker keeps: each still gets a working client of its own. */
static void test_workload__more_clusters_than_kept(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        char name[16];

        (void)state;
        for (int i = 0; i < 6; i++) {
                (void)snprintf(name, sizeof(name), "k%d", i);
                world_put_kubeconfig(w, name);
        }
        for (int round = 0; round < 2; round++)
                for (int i = 0; i < 6; i++) {
                        struct kube_client *wl = NULL;

                        (void)snprintf(name, sizeof(name), "k%d", i);
                        assert_int_equal(reconciler_workload_client(w->w, NS, name, &wl), 0);
                        assert_true(went_to(w, wl, WORKLOAD));
                }
        world_free(w);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_workload__one_secret_read_and_client_for_a_fleet),
                cmocka_unit_test(test_workload__a_changed_secret_builds_a_new_client),
                cmocka_unit_test(test_workload__a_failed_call_forgets_the_client),
                cmocka_unit_test(test_workload__more_clusters_than_kept),
        };

        return cmocka_run_group_tests_name("workload", tests, NULL, NULL);
}
