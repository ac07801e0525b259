/*
 * health: the probe format of controller-runtime over a real plain-HTTP listener, with
 * checks that pass and fail on demand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "health.h"
#include "http_server.h"
#include "router.h"
#include "testutil.h"
#include "xalloc.h"

struct fixture {
        struct health *health;
        struct router *router;
        struct http_server *server;
        _Atomic bool webhook_ok; /* written by the test, read by the server thread */
};

static bool check_flag(void *ud, char **ret_reason)
{
        struct fixture *f = ud;

        if (!f->webhook_ok)
                *ret_reason = xstrdup("certificate missing");
        return f->webhook_ok;
}

static int setup(void **state)
{
        struct fixture *f = xcalloc(1, sizeof(*f));
        char *err = NULL;

        f->webhook_ok = true;
        assert_int_equal(health_new(&f->health), 0);
        assert_int_equal(health_add_check(f->health, HEALTH_LIVE | HEALTH_READY, "ping",
                                          health_check_ping, NULL),
                         0);
        assert_int_equal(health_add_check(f->health, HEALTH_READY, "webhook", check_flag, f), 0);
        assert_int_equal(router_new(&f->router), 0);
        assert_int_equal(health_register_routes(f->health, f->router), 0);
        router_freeze(f->router);
        assert_int_equal(http_server_start(&(struct http_server_opts){ .name = "health",
                                                                       .host = "127.0.0.1",
                                                                       .router = f->router },
                                           &f->server, &err),
                         0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;

        http_server_free(f->server);
        router_free(f->router);
        health_free(f->health);
        free(f);
        return 0;
}

static void test_health__failing_check_gives_500_with_check_lines(void **state)
{
        struct fixture *f = *state;
        long st;
        char *b;

        f->webhook_ok = false;
        b = test_http_get(http_server_port(f->server), "/readyz", &st);
        assert_int_equal(st, 500);
        assert_string_equal(b, "[+]ping ok\n[-]webhook failed: reason withheld\n"
                               "readyz check failed\n");
        free(b);
        /* Liveness does not include the readiness-only check. */
        b = test_http_get(http_server_port(f->server), "/healthz", &st);
        assert_int_equal(st, 200);
        assert_string_equal(b, "ok");
        free(b);
        b = test_http_get(http_server_port(f->server), "/readyz?exclude=webhook", &st);
        assert_int_equal(st, 200);
        assert_string_equal(b, "ok");
        free(b);
        b = test_http_get(http_server_port(f->server), "/readyz/webhook", &st);
        assert_int_equal(st, 500);
        free(b);
        f->webhook_ok = true;
        b = test_http_get(http_server_port(f->server), "/readyz", &st);
        assert_int_equal(st, 200);
        assert_string_equal(b, "ok");
        free(b);
}

static void test_health__verbose_lists_every_check(void **state)
{
        struct fixture *f = *state;
        long st;
        char *b = test_http_get(http_server_port(f->server), "/healthz?verbose", &st);

        assert_int_equal(st, 200);
        assert_string_equal(b, "[+]ping ok\nhealthz check passed\n");
        free(b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_health__failing_check_gives_500_with_check_lines, setup, teardown),
                cmocka_unit_test_setup_teardown(test_health__verbose_lists_every_check, setup,
                                                teardown),
        };
        int r;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = cmocka_run_group_tests_name("health", tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}
