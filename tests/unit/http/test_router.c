/* router and buf: route lookup (404/405, prefixes, frozen tables), JSON content types,
 * and the capped buffer that every network input goes through. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "router.h"

static void handler(void *ud, const struct http_request *req, struct http_response *resp)
{
        (void)ud;
        (void)req;
        (void)resp;
}

static void test_router__lookup_finds_route_or_says_404_405(void **state)
{
        struct router *r = NULL;
        const struct route *found = NULL;

        (void)state;
        assert_int_equal(router_new(&r), 0);
        assert_int_equal(router_add(r, &(struct route){ .path = "/validate-x",
                                                        .method = "POST",
                                                        .fn = handler }),
                         0);
        assert_int_equal(router_add(r, &(struct route){ .path = "/healthz",
                                                        .method = "GET",
                                                        .fn = handler,
                                                        .flags = ROUTE_PREFIX }),
                         0);
        assert_int_equal(router_add(r, &(struct route){ .path = "/validate-x",
                                                        .method = "POST",
                                                        .fn = handler }),
                         CM_EEXIST);
        router_freeze(r);
        assert_int_equal(router_lookup(r, "/validate-x", "POST", &found), ROUTE_FOUND);
        assert_string_equal(found->path, "/validate-x");
        assert_int_equal(router_lookup(r, "/validate-x", "GET", &found), ROUTE_METHOD_NOT_ALLOWED);
        assert_int_equal(router_lookup(r, "/validate-xy", "POST", &found), ROUTE_NOT_FOUND);
        assert_int_equal(router_lookup(r, "/healthz/ping", "GET", &found), ROUTE_FOUND);
        assert_int_equal(
                router_add(r, &(struct route){ .path = "/late", .method = "GET", .fn = handler }),
                CM_EINVAL);
        router_free(r);
}

static void test_router__json_content_types(void **state)
{
        (void)state;
        assert_true(http_content_type_is_json("application/json"));
        assert_true(http_content_type_is_json("application/json; charset=utf-8"));
        assert_true(http_content_type_is_json("Application/JSON"));
        assert_false(http_content_type_is_json("application/jsonx"));
        assert_false(http_content_type_is_json("text/plain"));
        assert_false(http_content_type_is_json(NULL));
}

static void test_buf__append_stops_at_cap_without_partial_write(void **state)
{
        struct buf b;
        char *out;
        size_t n;

        (void)state;
        buf_init(&b, 8);
        assert_int_equal(buf_append_str(&b, "12345"), 0);
        assert_int_equal(buf_append_str(&b, "6789"), CM_ETOOBIG);
        assert_int_equal(b.len, 5);
        assert_int_equal(buf_printf(&b, "%d", 678), 0);
        assert_int_equal(buf_printf(&b, "%d", 9), CM_ETOOBIG);
        assert_string_equal(b.data, "12345678");
        buf_consume(&b, 3);
        assert_string_equal(b.data, "45678");
        assert_int_equal(buf_reserve(&b, 4), CM_ETOOBIG);
        out = buf_take(&b, &n);
        assert_int_equal(n, 5);
        assert_string_equal(out, "45678");
        assert_null(b.data);
        free(out);
        buf_release(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_router__lookup_finds_route_or_says_404_405),
                cmocka_unit_test(test_router__json_content_types),
                cmocka_unit_test(test_buf__append_stops_at_cap_without_partial_write),
        };

        return cmocka_run_group_tests_name("router", tests, NULL, NULL);
}
