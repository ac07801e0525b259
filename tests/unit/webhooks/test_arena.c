/* arena: cJSON allocations inside a request scope come from the thread's block and are
 * rewound at the end; outside a scope they are malloc; an escaped tree abandons the block
 * instead of being overwritten; the webhook handlers free every tree they build. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "arena.h"
#include "json.h"
#include "router.h"
#include "testutil.h"
#include "webhooks.h"
#include "xalloc.h"

static const char review_fmt[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"u1\",\"kind\":{\"group\":\"infrastructure.cluster.x-k8s.io\",\"version\":"
        "\"v1beta1\",\"kind\":\"MaasMachineTemplate\"},\"operation\":\"CREATE\",\"object\":{"
        "\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
        "\"MaasMachineTemplate\",\"metadata\":{\"name\":\"t\",\"namespace\":\"d\"},\"spec\":{"
        "\"template\":{\"spec\":{\"image\":\"%s\",\"minCPU\":%d,\"minMemory\":4096,"
        "\"tags\":[\"gpu\",\"gpu\"]}}}}}}";

static int setup(void **state)
{
        (void)state;
        xalloc_install_cjson_hooks();
        return 0;
}

static void test_arena__scope_serves_cjson_from_the_block(void **state)
{
        unsigned long before = arena_hits();
        cJSON *tree;

        (void)state;
        arena_scope_begin();
        tree = test_json("{\"a\":[1,2,3],\"b\":\"text\"}");
        assert_non_null(tree);
        cJSON_Delete(tree);
        arena_scope_end();
        assert_true(arena_hits() > before);
        assert_int_equal(arena_escapes(), 0);
}

static void test_arena__outside_a_scope_allocations_are_malloc(void **state)
{
        unsigned long before = arena_hits();
        cJSON *tree = test_json("{\"a\":[1,2,3]}");

        (void)state;
        assert_non_null(tree);
        cJSON_Delete(tree);
        assert_int_equal(arena_hits(), before);
}

static void test_arena__block_is_rewound_between_scopes(void **state)
{
        unsigned long before = arena_hits();
        cJSON *arr;

        (void)state;
        /* 200 scopes of ~10 KiB each: far more than one block holds without rewinding. */
        for (int i = 0; i < 200; i++) {
                arena_scope_begin();
                arr = cJSON_CreateArray();
                for (int j = 0; j < 100; j++)
                        cJSON_AddItemToArray(arr, cJSON_CreateString("0123456789abcdef"));
                cJSON_Delete(arr);
                arena_scope_end();
        }
        assert_true(arena_hits() - before >= 200u * 201u);
        assert_int_equal(arena_escapes(), 0);
}

static void test_arena__oversized_allocation_falls_back_to_malloc(void **state)
{
        size_t n = ARENA_BLOCK_SIZE + 100;
        char *big = xmalloc(n);
        cJSON *s;

        (void)state;
        memset(big, 'x', n - 1);
        big[n - 1] = '\0';
        arena_scope_begin();
        s = cJSON_CreateString(big); /* the node from the block, the copy from malloc */
        assert_non_null(s);
        assert_int_equal(strlen(s->valuestring), n - 1);
        cJSON_Delete(s);
        arena_scope_end();
        free(big);
        assert_int_equal(arena_escapes(), 0);
}

/* Runs on its own thread: abandoning a block is permanent for that thread. */
static void *escape_thread(void *arg)
{
        unsigned long *hits_after = arg;
        cJSON *escaped;
        cJSON *later;

        arena_scope_begin();
        escaped = test_json("{\"kept\":\"beyond the scope\"}");
        arena_scope_end();
        /* The escaped tree is intact and can still be freed. */
        arena_scope_begin();
        later = test_json("{\"x\":1}");
        *hits_after = arena_hits();
        cJSON_Delete(later);
        arena_scope_end();
        if (strcmp(cJSON_GetObjectItemCaseSensitive(escaped, "kept")->valuestring,
                   "beyond the scope") != 0)
                *hits_after = 0;
        cJSON_Delete(escaped);
        return NULL;
}

static void test_arena__escaped_tree_abandons_the_block(void **state)
{
        unsigned long escapes = arena_escapes();
        unsigned long hits_after = 0;
        unsigned long hits_before;
        pthread_t t;

        (void)state;
        hits_before = arena_hits();
        assert_int_equal(pthread_create(&t, NULL, escape_thread, &hits_after), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_int_equal(arena_escapes(), escapes + 1);
        /* the first scope's hits are counted; the second scope used malloc */
        assert_true(hits_after > hits_before);
        assert_int_equal(arena_hits(), hits_after);
}

static void serve(const struct router *r, const char *path, const char *body, unsigned *status)
{
        const struct route *route = NULL;
        struct http_request req = {
                .method = "POST", .path = path, .body = body, .body_len = strlen(body)
        };
        struct http_response resp = { 0 };

        assert_int_equal(router_lookup(r, path, "POST", &route), ROUTE_FOUND);
        route->fn(route->ud, &req, &resp);
        *status = resp.status;
        http_response_release(&resp);
}

static void test_arena__webhook_handlers_free_every_tree(void **state)
{
        static const char *const paths[] = {
                "/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachinetemplate",
                "/mutate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachinetemplate",
        };
        unsigned long hits = arena_hits();
        unsigned long escapes = arena_escapes();
        struct router *r = NULL;
        char body[2048];
        unsigned status = 0;

        (void)state;
        assert_int_equal(router_new(&r), 0);
        assert_int_equal(webhooks_register(r), 0);
        for (size_t i = 0; i < 2; i++) {
                /* allowed, denied (minCPU -1, bad image), patched (duplicate tag) */
                (void)snprintf(body, sizeof(body), review_fmt, "ubuntu/jammy", 2);
                serve(r, paths[i], body, &status);
                assert_int_equal(status, 200);
                (void)snprintf(body, sizeof(body), review_fmt, "nope/x//", -1);
                serve(r, paths[i], body, &status);
                assert_int_equal(status, 200);
                serve(r, paths[i], "{\"kind\":\"AdmissionReview\"}", &status);
                assert_int_equal(status, 400);
        }
        r = router_free(r);
        assert_true(arena_hits() > hits);
        assert_int_equal(arena_escapes(), escapes);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_arena__scope_serves_cjson_from_the_block),
                cmocka_unit_test(test_arena__outside_a_scope_allocations_are_malloc),
                cmocka_unit_test(test_arena__block_is_rewound_between_scopes),
                cmocka_unit_test(test_arena__oversized_allocation_falls_back_to_malloc),
                cmocka_unit_test(test_arena__escaped_tree_abandons_the_block),
                cmocka_unit_test(test_arena__webhook_handlers_free_every_tree),
        };

        return cmocka_run_group_tests(tests, setup, NULL);
}
