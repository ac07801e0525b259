/*
 * Integration: patch_helper_write against kube-sim, counted with the sim's request log:
 * an unchanged object writes nothing; a spec (or metadata) change is one merge PATCH on the
 * object; a status change is one PATCH on /status; both are two PATCHes; removed labels
 * are removed on the server; errors come back as the client's. Uses Nodes (a built-in kind
 * with a status subresource).
 *
 * Needs $CAPMAAS_BUILD_DIR/kube-sim.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "kubesim.h"
#include "patch_helper.h"
#include "testutil.h"
#include "xalloc.h"

/* --- fixture ----------------------------------------------------------------------------- */

struct fx {
        struct kubesim sim;
        struct kube_client *kc;
        cJSON *before; /* the Node as read from the server */
};

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));
        cJSON *node = test_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\","
                                "\"metadata\":{\"name\":\"worker-1\",\"labels\":{\"zone\":\"a\","
                                "\"rack\":\"r1\"}},"
                                "\"spec\":{\"podCIDR\":\"10.0.1.0/24\",\"taints\":[{\"key\":\"k\","
                                "\"effect\":\"NoSchedule\"}]}}");
        cJSON *st = test_json("{\"status\":{\"phase\":\"Pending\",\"capacity\":{\"cpu\":\"4\"}}}");
        char *text = cJSON_PrintUnformatted(st);

        assert_int_equal(kubesim_start(&f->sim, NULL), 0);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &f->sim.cfg }, &f->kc), 0);
        assert_int_equal(kube_create(f->kc, &KUBE_RES_NODES, NULL, node, NULL, NULL), 0);
        assert_int_equal(kube_patch(f->kc,
                                    &(struct kube_patch_opts){ .resource = &KUBE_RES_NODES,
                                                               .ns = NULL,
                                                               .name = "worker-1",
                                                               .subresource = "status",
                                                               .type = KUBE_PATCH_MERGE,
                                                               .body = text },
                                    &f->before, NULL),
                         0);
        cJSON_free(text);
        cJSON_Delete(st);
        cJSON_Delete(node);
        kubesim_clear_requests(&f->sim);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        cJSON_Delete(f->before);
        f->kc = kube_client_free(f->kc);
        kubesim_stop(&f->sim);
        free(f);
        return 0;
}

/* --- helpers ----------------------------------------------------------------------------- */

struct reqs {
        int total;
        int patch_main;   /* PATCH /api/v1/nodes/worker-1 */
        int patch_status; /* PATCH /api/v1/nodes/worker-1/status */
        int merge_type;   /* of those, with the merge-patch content type */
};

static struct reqs requests(struct fx *f)
{
        cJSON *log = kubesim_call(&f->sim, "GET", "/_sim/requests", NULL);
        struct reqs r = { 0 };
        const cJSON *it;

        cJSON_ArrayForEach (it, cJSON_GetObjectItemCaseSensitive(log, "items")) {
                const char *m = cJSON_GetObjectItemCaseSensitive(it, "method")->valuestring;
                const char *p = cJSON_GetObjectItemCaseSensitive(it, "path")->valuestring;
                const char *ct = cJSON_GetObjectItemCaseSensitive(it, "contentType")->valuestring;

                r.total++;
                if (strcmp(m, "PATCH") != 0)
                        continue;
                if (!strcmp(p, "/api/v1/nodes/worker-1"))
                        r.patch_main++;
                else if (!strcmp(p, "/api/v1/nodes/worker-1/status"))
                        r.patch_status++;
                if (strstr(ct, "application/merge-patch+json"))
                        r.merge_type++;
        }
        cJSON_Delete(log);
        return r;
}

static cJSON *server_node(struct fx *f)
{
        cJSON *n = NULL;

        assert_int_equal(kube_get(f->kc, &KUBE_RES_NODES, NULL, "worker-1", &n, NULL), 0);
        return n;
}

static const cJSON *at(const cJSON *o, const char *a, const char *b, const char *c)
{
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);

        if (b)
                x = cJSON_GetObjectItemCaseSensitive(x, b);
        if (c)
                x = cJSON_GetObjectItemCaseSensitive(x, c);
        return x;
}

static const char *str(const cJSON *o, const char *a, const char *b, const char *c)
{
        const cJSON *x = at(o, a, b, c);

        return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* Writes after over f->before; returns the number of PATCH calls made. */
static unsigned write_after(struct fx *f, const cJSON *after, cJSON **latest)
{
        unsigned writes = 99;

        assert_int_equal(
                patch_helper_write(f->kc, &KUBE_RES_NODES, f->before, after, latest, &writes, NULL),
                0);
        return writes;
}

/* --- tests ------------------------------------------------------------------------------- */

static void test_patch_helper__unchanged_object_writes_nothing(void **state)
{
        struct fx *f = *state;
        cJSON *after = cJSON_Duplicate(f->before, true);
        cJSON *latest = NULL;
        struct reqs r;

        assert_int_equal(write_after(f, after, &latest), 0);
        assert_null(latest);
        r = requests(f);
        assert_int_equal(r.total, 0);
        cJSON_Delete(after);
}

static void test_patch_helper__spec_change_is_one_patch_on_the_object(void **state)
{
        struct fx *f = *state;
        cJSON *after = cJSON_Duplicate(f->before, true);
        cJSON *latest = NULL;
        cJSON *srv;
        struct reqs r;

        json_set_bool(cJSON_GetObjectItemCaseSensitive(after, "spec"), "unschedulable", true);
        assert_int_equal(write_after(f, after, &latest), 1);
        r = requests(f);
        assert_int_equal(r.total, 1);
        assert_int_equal(r.patch_main, 1);
        assert_int_equal(r.patch_status, 0);
        assert_int_equal(r.merge_type, 1);
        assert_non_null(latest);
        assert_true(cJSON_IsTrue(at(latest, "spec", "unschedulable", NULL)));
        srv = server_node(f);
        assert_true(cJSON_IsTrue(at(srv, "spec", "unschedulable", NULL)));
        assert_string_equal(str(srv, "spec", "podCIDR", NULL), "10.0.1.0/24");
        assert_string_equal(str(srv, "status", "phase", NULL), "Pending");
        cJSON_Delete(srv);
        cJSON_Delete(latest);
        cJSON_Delete(after);
}

static void test_patch_helper__status_change_is_one_patch_on_status(void **state)
{
        struct fx *f = *state;
        cJSON *after = cJSON_Duplicate(f->before, true);
        cJSON *latest = NULL;
        cJSON *srv;
        struct reqs r;

        json_set_string(cJSON_GetObjectItemCaseSensitive(after, "status"), "phase", "Running");
        assert_int_equal(write_after(f, after, &latest), 1);
        r = requests(f);
        assert_int_equal(r.total, 1);
        assert_int_equal(r.patch_main, 0);
        assert_int_equal(r.patch_status, 1);
        assert_int_equal(r.merge_type, 1);
        assert_string_equal(str(latest, "status", "phase", NULL), "Running");
        srv = server_node(f);
        assert_string_equal(str(srv, "status", "phase", NULL), "Running");
        assert_string_equal(str(srv, "status", "capacity", "cpu"), "4");
        cJSON_Delete(srv);
        cJSON_Delete(latest);
        cJSON_Delete(after);
}

static void test_patch_helper__spec_and_status_change_is_two_patches(void **state)
{
        struct fx *f = *state;
        cJSON *after = cJSON_Duplicate(f->before, true);
        cJSON *latest = NULL;
        cJSON *srv;
        struct reqs r;

        json_set_string(cJSON_GetObjectItemCaseSensitive(after, "spec"), "podCIDR", "10.0.9.0/24");
        json_set_string(cJSON_GetObjectItemCaseSensitive(after, "status"), "phase", "Running");
        assert_int_equal(write_after(f, after, &latest), 2);
        r = requests(f);
        assert_int_equal(r.total, 2);
        assert_int_equal(r.patch_main, 1);
        assert_int_equal(r.patch_status, 1);
        /* the last answer carries both changes */
        assert_string_equal(str(latest, "spec", "podCIDR", NULL), "10.0.9.0/24");
        assert_string_equal(str(latest, "status", "phase", NULL), "Running");
        srv = server_node(f);
        assert_string_equal(str(srv, "spec", "podCIDR", NULL), "10.0.9.0/24");
        assert_string_equal(str(srv, "status", "phase", NULL), "Running");
        cJSON_Delete(srv);
        cJSON_Delete(latest);
        cJSON_Delete(after);
}

static void test_patch_helper__removed_label_and_array_change_reach_the_server(void **state)
{
        struct fx *f = *state;
        cJSON *after = cJSON_Duplicate(f->before, true);
        cJSON *labels = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(after, "metadata"), "labels");
        cJSON *srv;

        cJSON_DeleteItemFromObjectCaseSensitive(labels, "rack");
        json_set_item(cJSON_GetObjectItemCaseSensitive(after, "spec"), "taints",
                      test_json("[{\"key\":\"k2\",\"effect\":\"NoExecute\"}]"));
        assert_int_equal(write_after(f, after, NULL), 1);
        srv = server_node(f);
        assert_null(at(srv, "metadata", "labels", "rack"));
        assert_string_equal(str(srv, "metadata", "labels", "zone"), "a");
        assert_int_equal(cJSON_GetArraySize(at(srv, "spec", "taints", NULL)), 1);
        assert_string_equal(
                str(cJSON_GetArrayItem(at(srv, "spec", "taints", NULL), 0), "key", NULL, NULL),
                "k2");
        cJSON_Delete(srv);
        cJSON_Delete(after);
}

static void test_patch_helper__missing_object_reports_not_found(void **state)
{
        struct fx *f = *state;
        cJSON *after = cJSON_Duplicate(f->before, true);
        struct kube_error e = { 0 };
        unsigned writes = 99;
        cJSON *latest = NULL;

        assert_int_equal(kube_delete(f->kc, &KUBE_RES_NODES, NULL, "worker-1", NULL, NULL), 0);
        json_set_bool(cJSON_GetObjectItemCaseSensitive(after, "spec"), "unschedulable", true);
        assert_int_equal(
                patch_helper_write(f->kc, &KUBE_RES_NODES, f->before, after, &latest, &writes, &e),
                CM_ENOTFOUND);
        assert_int_equal(e.http_status, 404);
        assert_int_equal(writes, 99);
        assert_null(latest);
        kube_error_release(&e);
        cJSON_Delete(after);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_patch_helper__unchanged_object_writes_nothing,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_patch_helper__spec_change_is_one_patch_on_the_object, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_patch_helper__status_change_is_one_patch_on_status, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_patch_helper__spec_and_status_change_is_two_patches, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_patch_helper__removed_label_and_array_change_reach_the_server, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(test_patch_helper__missing_object_reports_not_found,
                                                setup, teardown),
        };

        return cmocka_run_group_tests_name("patch_helper_integration", tests, NULL, NULL);
}
