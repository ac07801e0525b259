/*
 * Unit tests for kube_authn over a fake transport (the API server's answers scripted) and
 * a fake clock: what each review sends, the four results, and the cache — allowed answers
 * kept allow_ttl, refusals deny_ttl, errors never, separate entries per token and path,
 * the entry that expires first evicted when full.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "clock.h"
#include "err.h"
#include "http_transport.h"
#include "json.h"
#include "kube_authn.h"
#include "kube_client.h"
#include "xalloc.h"

/* The API server: tokens "reader" and "viewer" are authenticated (as users of that name),
 * anything else is not; only "reader" may get /metrics. fail_next answers 500. */
struct fake {
        struct http_transport t;
        int token_reviews, access_reviews;
        int fail_next;
        cJSON *last_sar; /* the last SubjectAccessReview sent */
};

static void reply(struct transport_response *resp, long status, cJSON *body)
{
        resp->status = status;
        resp->body = cJSON_PrintUnformatted(body);
        resp->body_len = strlen(resp->body);
        resp->content_type = xstrdup("application/json");
        resp->retry_after_s = -1;
        cJSON_Delete(body);
}

static void token_review(struct fake *f, cJSON *req, struct transport_response *resp)
{
        const char *token = json_find_str(req, "spec", "token", NULL);
        cJSON *st = cJSON_AddObjectToObject(req, "status");

        f->token_reviews++;
        if (token && (!strcmp(token, "reader") || !strcmp(token, "viewer"))) {
                cJSON *u = cJSON_AddObjectToObject(st, "user");
                const char *groups[] = { "system:authenticated" };

                cJSON_AddBoolToObject(st, "authenticated", true);
                cJSON_AddStringToObject(u, "username", token);
                cJSON_AddStringToObject(u, "uid", "uid-1");
                cJSON_AddItemToObject(u, "groups", cJSON_CreateStringArray(groups, 1));
        } else {
                cJSON_AddObjectToObject(st, "user");
                cJSON_AddStringToObject(st, "error", "invalid bearer token");
        }
        reply(resp, 201, req);
}

static void access_review(struct fake *f, cJSON *req, struct transport_response *resp)
{
        const char *user = json_find_str(req, "spec", "user", NULL);
        const char *path = json_find_str(req, "spec", "nonResourceAttributes", "path", NULL);

        f->access_reviews++;
        cJSON_Delete(f->last_sar);
        f->last_sar = cJSON_Duplicate(req, true);
        cJSON_AddBoolToObject(cJSON_AddObjectToObject(req, "status"), "allowed",
                              user && !strcmp(user, "reader") && path && !strcmp(path, "/metrics"));
        reply(resp, 201, req);
}

static int fake_send(struct http_transport *t,
                     const struct transport_request *req,
                     struct transport_response *resp)
{
        struct fake *f = (struct fake *)t;
        cJSON *body = cJSON_ParseWithLength(req->body, req->body_len);

        assert_string_equal(req->method, "POST");
        if (f->fail_next) {
                f->fail_next--;
                cJSON_Delete(body);
                reply(resp, 500, cJSON_Parse("{\"kind\":\"Status\",\"code\":500}"));
                return 0;
        }
        if (strstr(req->url, "/apis/authentication.k8s.io/v1/tokenreviews"))
                token_review(f, body, resp);
        else if (strstr(req->url, "/apis/authorization.k8s.io/v1/subjectaccessreviews"))
                access_review(f, body, resp);
        else
                fail_msg("unexpected URL %s", req->url);
        return 0;
}

static void fake_destroy(struct http_transport *t)
{
        (void)t;
}

struct fixture {
        struct fake fake;
        struct clock_fake clk;
        struct kube_config cfg;
        struct kube_authn *a;
};

static struct fixture *make(unsigned cache_size)
{
        struct fixture *f = xcalloc(1, sizeof(*f));

        f->fake.t = (struct http_transport){ .send = fake_send, .destroy = fake_destroy };
        clock_fake_init(&f->clk, 1000, 1700000000);
        f->cfg.server = xstrdup("https://kube.test:6443");
        assert_int_equal(kube_authn_new(&(struct kube_authn_opts){ .config = &f->cfg,
                                                                   .clock = &f->clk.ops,
                                                                   .cache_size = cache_size,
                                                                   .transport = &f->fake.t },
                                        &f->a),
                         0);
        return f;
}

static int setup(void **state)
{
        *state = make(0);
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;

        kube_authn_free(f->a);
        cJSON_Delete(f->fake.last_sar);
        kube_config_release(&f->cfg);
        free(f);
        return 0;
}

#define USER_LEN 64

/* user: USER_LEN bytes, or NULL. */
static enum kube_authn_result check(struct fixture *f,
                                    const char *token,
                                    const char *path,
                                    char *user)
{
        char buf[USER_LEN];

        return kube_authn_check(f->a, token, "get", path, user ? user : buf, USER_LEN);
}

static void test_kube_authn__the_four_results_and_what_is_sent(void **state)
{
        struct fixture *f = *state;
        char user[USER_LEN];

        assert_int_equal(check(f, "reader", "/metrics", user), KUBE_AUTHN_ALLOWED);
        assert_string_equal(user, "reader");
        /* the SubjectAccessReview carries the TokenReview's user, uid and groups */
        assert_string_equal(json_find_str(f->fake.last_sar, "spec", "user", NULL), "reader");
        assert_string_equal(json_find_str(f->fake.last_sar, "spec", "uid", NULL), "uid-1");
        assert_string_equal(
                cJSON_GetArrayItem(json_find(f->fake.last_sar, "spec", "groups", NULL), 0)
                        ->valuestring,
                "system:authenticated");
        assert_string_equal(
                json_find_str(f->fake.last_sar, "spec", "nonResourceAttributes", "verb", NULL),
                "get");
        assert_string_equal(json_find_str(f->fake.last_sar, "kind", NULL), "SubjectAccessReview");
        assert_int_equal(check(f, "viewer", "/metrics", user), KUBE_AUTHN_DENIED);
        assert_string_equal(user, "viewer");
        assert_int_equal(check(f, "forged", "/metrics", user), KUBE_AUTHN_UNAUTHENTICATED);
        assert_string_equal(user, "");
        f->fake.fail_next = 1;
        assert_int_equal(check(f, "other", "/metrics", user), KUBE_AUTHN_ERROR);
        assert_int_equal(f->fake.token_reviews, 3);
        assert_int_equal(f->fake.access_reviews, 2);
}

static void test_kube_authn__allowed_answers_live_a_minute(void **state)
{
        struct fixture *f = *state;
        struct kube_authn_stats st;

        for (int i = 0; i < 6; i++) { /* a scrape every 10 s */
                assert_int_equal(check(f, "reader", "/metrics", NULL), KUBE_AUTHN_ALLOWED);
                clock_fake_advance(&f->clk, 9999);
        }
        assert_int_equal(f->fake.token_reviews, 1);
        assert_int_equal(f->fake.access_reviews, 1);
        clock_fake_advance(&f->clk, 6); /* 60 s after the first */
        assert_int_equal(check(f, "reader", "/metrics", NULL), KUBE_AUTHN_ALLOWED);
        assert_int_equal(f->fake.token_reviews, 2);
        assert_int_equal(f->fake.access_reviews, 2);
        kube_authn_stats(f->a, &st);
        assert_int_equal(st.cache_hits, 5);
        assert_int_equal(st.token_reviews, 2);
}

static void test_kube_authn__refusals_live_ten_seconds_errors_not_at_all(void **state)
{
        struct fixture *f = *state;
        char user[USER_LEN];

        assert_int_equal(check(f, "viewer", "/metrics", NULL), KUBE_AUTHN_DENIED);
        assert_int_equal(check(f, "forged", "/metrics", NULL), KUBE_AUTHN_UNAUTHENTICATED);
        clock_fake_advance(&f->clk, 9999);
        assert_int_equal(check(f, "viewer", "/metrics", user), KUBE_AUTHN_DENIED);
        assert_string_equal(user, "viewer"); /* from the cache, for the 403 text */
        assert_int_equal(check(f, "forged", "/metrics", NULL), KUBE_AUTHN_UNAUTHENTICATED);
        assert_int_equal(f->fake.token_reviews, 2);
        clock_fake_advance(&f->clk, 1);
        assert_int_equal(check(f, "viewer", "/metrics", NULL), KUBE_AUTHN_DENIED);
        assert_int_equal(check(f, "forged", "/metrics", NULL), KUBE_AUTHN_UNAUTHENTICATED);
        assert_int_equal(f->fake.token_reviews, 4);
        /* a failed review is asked again at once */
        f->fake.fail_next = 1;
        assert_int_equal(check(f, "reader", "/metrics", NULL), KUBE_AUTHN_ERROR);
        assert_int_equal(check(f, "reader", "/metrics", NULL), KUBE_AUTHN_ALLOWED);
        assert_int_equal(f->fake.token_reviews, 5); /* the failed one never got an answer */
}

static void test_kube_authn__entries_per_token_and_path(void **state)
{
        struct fixture *f = *state;

        assert_int_equal(check(f, "reader", "/metrics", NULL), KUBE_AUTHN_ALLOWED);
        assert_int_equal(check(f, "reader", "/debug/pprof/", NULL), KUBE_AUTHN_DENIED);
        assert_int_equal(check(f, "reader", "/metrics", NULL), KUBE_AUTHN_ALLOWED);
        assert_int_equal(f->fake.access_reviews, 2);
}

static void test_kube_authn__a_full_cache_evicts_what_expires_first(void **state)
{
        struct fixture *f = make(2);

        (void)state;
        assert_int_equal(check(f, "viewer", "/metrics", NULL), KUBE_AUTHN_DENIED);  /* 10 s */
        assert_int_equal(check(f, "reader", "/metrics", NULL), KUBE_AUTHN_ALLOWED); /* 60 s */
        assert_int_equal(check(f, "forged", "/metrics", NULL), KUBE_AUTHN_UNAUTHENTICATED);
        assert_int_equal(f->fake.token_reviews, 3);
        /* viewer's entry went; reader's stayed */
        assert_int_equal(check(f, "reader", "/metrics", NULL), KUBE_AUTHN_ALLOWED);
        assert_int_equal(f->fake.token_reviews, 3);
        assert_int_equal(check(f, "viewer", "/metrics", NULL), KUBE_AUTHN_DENIED);
        assert_int_equal(f->fake.token_reviews, 4);
        teardown((void **)&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_kube_authn__the_four_results_and_what_is_sent,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_kube_authn__allowed_answers_live_a_minute,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_kube_authn__refusals_live_ten_seconds_errors_not_at_all, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(test_kube_authn__entries_per_token_and_path, setup,
                                                teardown),
                cmocka_unit_test(test_kube_authn__a_full_cache_evicts_what_expires_first),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
