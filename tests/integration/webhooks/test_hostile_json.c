/*
 * Hostile AdmissionReviews over HTTPS (issue #22): against the capmaas binary, the array
 * bomb and the other budgets get 400 naming the limit, duplicate keys, \u0000 and invalid
 * UTF-8 get 400 naming the place (and nothing invalid comes back), and 8 array bombs of
 * 3 MiB in flight at once leave the peak RSS (VmHWM) within idle + 48 MiB; against an
 * in-process server with a small decode budget, a review the budget cannot hold gets 429
 * with Retry-After, and one that waits is served when the budget frees.
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <gnutls/gnutls.h>

#include "buf.h"
#include "certstore.h"
#include "http_server.h"
#include "metrics.h"
#include "router.h"
#include "testutil.h"
#include "utf8_oracle.h"
#include "webhooks.h"
#include "xalloc.h"

#define PATH_MM "/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachine"
#define MIB     (1024u * 1024u)

/* A review of MaasMachine m1 with the request members before and after the object (each
 * may be ""), the object's metadata name given raw. */
static char *review(const char *before, const char *name, const char *after)
{
        return xasprintf("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                         "\"request\":{%s\"uid\":\"u-1\",\"kind\":{\"group\":"
                         "\"infrastructure.cluster.x-k8s.io\",\"version\":\"v1beta1\",\"kind\":"
                         "\"MaasMachine\"},\"operation\":\"CREATE\",\"namespace\":\"default\","
                         "\"object\":{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                         "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"%s\",\"namespace\":"
                         "\"default\"},\"spec\":{\"image\":\"ubuntu/jammy\",\"minCPU\":2,"
                         "\"minMemory\":4096}}%s}}",
                         before, name, after);
}

/* The review with "extra":[0,0,...] of n numbers after the object (the bomb). */
static char *bomb(size_t n, size_t *ret_len)
{
        char *head = review("", "m1", ",\"extra\":[");
        size_t hl = strlen(head) - 2, len = 0; /* without the closing "}}" */
        char *s = xmalloc(hl + 2 * n + 8);

        memcpy(s, head, hl);
        len = hl;
        for (size_t i = 0; i < n; i++) {
                s[len++] = '0';
                s[len++] = ',';
        }
        s[len - 1] = ']';
        memcpy(s + len, "}}", 3);
        *ret_len = len + 2;
        free(head);
        return s;
}

static int send_all(struct tls_conn *c, const char *data, size_t n)
{
        while (n) {
                ssize_t r = gnutls_record_send(c->session, data, n < 16384 ? n : 16384);

                if (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED)
                        continue;
                if (r <= 0)
                        return -1;
                data += r;
                n -= (size_t)r;
        }
        return 0;
}

struct reply {
        long status;
        char *raw; /* the whole response: status line, headers, body */
        const char *body;
};

static void reply_release(struct reply *r)
{
        free(r->raw);
        *r = (struct reply){ 0 };
}

/* Sends the request head and all of body but its last hold bytes on c. */
static void send_head(struct tls_conn *c, const char *body, size_t len, size_t hold)
{
        char *head = xasprintf("POST " PATH_MM " HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                               "application/json\r\nConnection: close\r\nContent-Length: %zu\r\n"
                               "\r\n",
                               len);

        assert_int_equal(send_all(c, head, strlen(head)), 0);
        assert_int_equal(send_all(c, body, len - hold), 0);
        free(head);
}

static void read_reply(struct tls_conn *c, struct reply *ret)
{
        const char *sp;

        *ret = (struct reply){ 0 };
        (void)tls_conn_recv_all(c, 60000, &ret->raw);
        assert_non_null(ret->raw);
        sp = strchr(ret->raw, ' ');
        ret->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        ret->body = strstr(ret->raw, "\r\n\r\n");
        ret->body = ret->body ? ret->body + 4 : "";
}

static void post(uint16_t port, const char *ca, const char *body, size_t len, struct reply *ret)
{
        struct tls_conn c;

        assert_int_equal(tls_conn_open(&c, port, NULL, ca), 0);
        send_head(&c, body, len ? len : strlen(body), 0);
        read_reply(&c, ret);
        tls_conn_close(&c);
}

/* ---- against the capmaas binary ---- */

struct proc_fixture {
        struct capmaas_proc proc;
        char ca[300];
        char *env[256];
        char *asan;
};

extern char **environ;

/* The environment with AddressSanitizer's quarantine off: freed memory then goes back to
 * the allocator as it does in a release build, so the RSS measures what is live. */
static void env_without_quarantine(struct proc_fixture *f)
{
        const char *asan = getenv("ASAN_OPTIONS");
        size_t n = 0;

        f->asan = xasprintf("ASAN_OPTIONS=%s%squarantine_size_mb=0", asan ? asan : "",
                            asan ? ":" : "");
        f->env[n++] = f->asan;
        for (char **e = environ; *e && n < 255; e++)
                if (strncmp(*e, "ASAN_OPTIONS=", 13) != 0)
                        f->env[n++] = *e;
        f->env[n] = NULL;
}

static int proc_setup(void **state)
{
        struct proc_fixture *f = xcalloc(1, sizeof(*f));

        env_without_quarantine(f);
        if (capmaas_start(&f->proc, NULL, NULL, f->env) < 0)
                return -1;
        (void)snprintf(f->ca, sizeof(f->ca), "%s/ca.crt", f->proc.cert_dir);
        *state = f;
        return 0;
}

static int proc_teardown(void **state)
{
        struct proc_fixture *f = *state;

        assert_int_equal(capmaas_stop(&f->proc, 10000), 0);
        free(f->asan);
        free(f);
        return 0;
}

struct hcase {
        const char *name;
        const char *before; /* request members before uid */
        const char *obj_name;
        const char *after; /* request members after the object */
        const char *message;
};

/* Duplicates as Go and cJSON would read them differently, NUL, each class of invalid UTF-8:
 * 400 naming the field. Offsets are those of the review() text. */
static const struct hcase hcases[] = {
        { "operation twice (Go: CREATE, cJSON: DELETE)", "\"operation\":\"DELETE\",", "m1", "",
          "bad AdmissionReview: request.operation: duplicate key (offset " },
        { "uid twice", "", "m1", ",\"uid\":\"u-2\"",
          "bad AdmissionReview: request.uid: duplicate key (offset " },
        { "name twice in the object's metadata", "", "m1\",\"name\":\"m2", "",
          "bad AdmissionReview: request.object.metadata.name: duplicate key (offset " },
        { "\\u0000 in the uid", "\"x\":\"a\\u0000b\",", "m1", "",
          "bad AdmissionReview: request.x: string holds \\u0000 (offset " },
        { "\\u0000 in the name", "", "m1\\u0000evil", "",
          "bad AdmissionReview: request.object.metadata.name: string holds \\u0000 (offset " },
        { "raw invalid byte", "", "m\xff", "",
          "bad AdmissionReview: request.object.metadata.name: string holds invalid UTF-8 "
          "(byte 0xff) (offset " },
        { "overlong slash", "", "m\xc0\xaf", "",
          "bad AdmissionReview: request.object.metadata.name: string holds invalid UTF-8 "
          "(byte 0xc0) (offset " },
        { "raw surrogate", "", "m\xed\xa0\x80", "",
          "bad AdmissionReview: request.object.metadata.name: string holds invalid UTF-8 "
          "(byte 0xed) (offset " },
        { "truncated sequence", "", "m\xe2\x82", "",
          "bad AdmissionReview: request.object.metadata.name: string holds invalid UTF-8 "
          "(byte 0xe2) (offset " },
        { "lone \\ud800", "", "m\\ud800", "",
          "bad AdmissionReview: request.object.metadata.name: string holds a lone UTF-16 "
          "surrogate \\ud800 (offset " },
        { "invalid UTF-8 in a key", "", "m1", ",\"\xc3\":1",
          "bad AdmissionReview: request: key holds invalid UTF-8 (byte 0xc3) (offset " },
};

static void test_hostile_json__strict_json_gets_400_naming_the_place(void **state)
{
        struct proc_fixture *f = *state;

        for (size_t i = 0; i < sizeof(hcases) / sizeof(hcases[0]); i++) {
                const struct hcase *c = &hcases[i];
                char *body = review(c->before, c->obj_name, c->after);
                struct reply r;

                post(f->proc.webhook_port, f->ca, body, 0, &r);
                if (r.status != 400 || strncmp(r.body, c->message, strlen(c->message)) != 0)
                        fail_msg("%s: %ld \"%s\", want 400 \"%s...\"", c->name, r.status, r.body,
                                 c->message);
                /* the answer never carries the invalid bytes back */
                if (!utf8_oracle_valid((const unsigned char *)r.raw))
                        fail_msg("%s: the answer is not valid UTF-8", c->name);
                reply_release(&r);
                free(body);
        }
}

/* A valid review with escapes and non-ASCII still passes (the strictness costs nothing
 * valid), and the escaped name is decoded once. */
static void test_hostile_json__valid_edge_cases_still_allowed(void **state)
{
        struct proc_fixture *f = *state;
        char *body = review("\"userInfo\":{\"username\":\"\\u00e9l\xc3\xa8ve \\ud83d\\ude00\"},",
                            "m1", ",\"options\":{\"big\":123456789012345678901234567890}");
        struct reply r;

        post(f->proc.webhook_port, f->ca, body, 0, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"allowed\":true"));
        reply_release(&r);
        free(body);
}

/* Keys are read decoded, as Go reads them: "\u0072equest" is request, "\u0075id" its uid
 * (echoed), and the escaped uid's value is decoded once. */
static void test_hostile_json__escaped_keys_are_the_members_they_name(void **state)
{
        struct proc_fixture *f = *state;
        const char *body = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                           "\"\\u0072equest\":{\"\\u0075id\":\"u-\\u0065sc\",\"kind\":{\"group\":"
                           "\"infrastructure.cluster.x-k8s.io\",\"version\":\"v1beta1\",\"kind\":"
                           "\"MaasMachine\"},\"op\\u0065ration\":\"CREATE\",\"object\":{\"kind\":"
                           "\"MaasMachine\",\"metadata\":{\"name\":\"m1\"},\"spec\":{\"image\":"
                           "\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096}}}}";
        struct reply r;

        post(f->proc.webhook_port, f->ca, body, 0, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"uid\":\"u-esc\",\"allowed\":true"));
        reply_release(&r);
}

/* request.kind.kind is request's own even when a later member elsewhere has the same shape
 * (the decoder picks members out of the text without building the review). */
static void test_hostile_json__members_are_taken_from_request_only(void **state)
{
        struct proc_fixture *f = *state;
        char *r1 = review("", "m1", "");
        char *body = xasprintf("%.*s,\"response\":{\"kind\":{\"kind\":\"Pod\"},\"uid\":\"x\"}}",
                               (int)(strlen(r1) - 1), r1);
        struct reply r;

        post(f->proc.webhook_port, f->ca, body, 0, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"uid\":\"u-1\",\"allowed\":true"));
        reply_release(&r);
        free(body);
        free(r1);
}

static void test_hostile_json__budgets_get_400_naming_the_limit(void **state)
{
        struct proc_fixture *f = *state;
        size_t len, n = 1u << 20;
        char *b = bomb(n, &len);
        char *want, *deep;
        struct reply r;

        /* the bomb: 2 MiB, a million numbers (a 67 MB tree before) */
        post(f->proc.webhook_port, f->ca, b, len, &r);
        assert_int_equal(r.status, 400);
        /* the review's own 21 values, the array and its numbers */
        want = xasprintf("bad AdmissionReview: request body has %zu JSON values; the limit is "
                         "65536\n",
                         21 + 1 + n);
        assert_string_equal(r.body, want);
        reply_release(&r);
        free(want);
        free(b);
        /* 65 levels: the root, the request and 63 arrays */
        deep = xcalloc(1, 200);
        memset(deep, '[', 63);
        b = review("", "m1", ",\"deep\":");
        want = xasprintf("%.*s%s}}", (int)(strlen(b) - 2), b, deep);
        post(f->proc.webhook_port, f->ca, want, 0, &r);
        assert_int_equal(r.status, 400);
        assert_non_null(strstr(r.body, "bad AdmissionReview: request body has JSON nested more "
                                       "than 64 levels deep at request.deep"));
        assert_non_null(strstr(r.body, "; the limit is 64\n"));
        reply_release(&r);
        free(want);
        free(b);
        free(deep);
}

static long status_kib(pid_t pid, const char *field)
{
        char path[64], line[256];
        size_t n = strlen(field);
        long v = -1;
        FILE *fp;

        (void)snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        fp = fopen(path, "r");
        assert_non_null(fp);
        while (fgets(line, sizeof(line), fp))
                if (strncmp(line, field, n) == 0 && line[n] == ':')
                        v = strtol(line + n + 1, NULL, 10);
        (void)fclose(fp);
        return v;
}

/* 8 bombs of 3 MiB each in flight at once: every body is held by the server before the
 * first is answered (the last byte of each goes out after all the rest). */
static void test_hostile_json__eight_bombs_in_flight_stay_within_idle_plus_48_mib(void **state)
{
        struct proc_fixture *f = *state;
        struct tls_conn c[8];
        struct reply r[8];
        size_t len, n = 3u * MIB / 2;
        char *b = bomb(n, &len);
        long idle = status_kib(f->proc.pid, "VmRSS"), peak, after;

        for (int i = 0; i < 8; i++) {
                assert_int_equal(tls_conn_open(&c[i], f->proc.webhook_port, NULL, f->ca), 0);
                send_head(&c[i], b, len, 1);
        }
        for (int i = 0; i < 8; i++)
                assert_int_equal(send_all(&c[i], b + len - 1, 1), 0);
        for (int i = 0; i < 8; i++) {
                read_reply(&c[i], &r[i]);
                tls_conn_close(&c[i]);
        }
        peak = status_kib(f->proc.pid, "VmHWM");
        after = status_kib(f->proc.pid, "VmRSS");
        print_message("memory: idle %ld KiB, peak %ld KiB (+%.1f MiB), after %ld KiB\n", idle, peak,
                      (double)(peak - idle) / 1024, after);
        /* before the scan, one such bomb built a tree of 126 MB */
        assert_true(peak - idle <= 48 * 1024);
        for (int i = 0; i < 8; i++) {
                assert_int_equal(r[i].status, 400);
                assert_non_null(strstr(r[i].body, "JSON values; the limit is 65536"));
                reply_release(&r[i]);
        }
        free(b);
}

/* ---- an in-process server with a small decode budget ---- */

struct srv_fixture {
        struct certstore *certs;
        struct router *router;
        struct webhooks *hooks;
        struct metrics *metrics;
        struct http_server *server;
        uint16_t port;
        char ca[300];
};

#define SMALL_BUDGET (1u * MIB)

static int srv_setup(void **state)
{
        struct srv_fixture *f = xcalloc(1, sizeof(*f));
        const char *dir = test_env("CAPMAAS_TEST_CERTS");
        char crt[300], key[300], *err = NULL;

        (void)snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
        (void)snprintf(key, sizeof(key), "%s/tls.key", dir);
        (void)snprintf(f->ca, sizeof(f->ca), "%s/ca.crt", dir);
        if (certstore_new(&(struct certstore_opts){ .cert_path = crt, .key_path = key }, &f->certs,
                          &err) < 0 ||
            router_new(&f->router) < 0 || metrics_new(&f->metrics) < 0 ||
            webhooks_new_opts(&(struct webhooks_opts){ .decode_budget = SMALL_BUDGET,
                                                       .decode_wait_ms = 2000,
                                                       .metrics = f->metrics },
                              &f->hooks) < 0 ||
            webhooks_register_with(f->hooks, f->router) < 0) {
                free(err);
                return -1;
        }
        router_freeze(f->router);
        if (http_server_start(&(struct http_server_opts){ .name = "webhook",
                                                          .host = "127.0.0.1",
                                                          .certs = f->certs,
                                                          .threads = 4,
                                                          .router = f->router },
                              &f->server, &err) < 0) {
                free(err);
                return -1;
        }
        f->port = http_server_port(f->server);
        *state = f;
        return 0;
}

static int srv_teardown(void **state)
{
        struct srv_fixture *f = *state;

        f->server = http_server_free(f->server);
        f->router = router_free(f->router);
        f->hooks = webhooks_free(f->hooks);
        f->metrics = metrics_free(f->metrics);
        f->certs = certstore_free(f->certs);
        free(f);
        return 0;
}

/* While the budget is held, a review waits its 2 s and gets 429 with Retry-After. */
static void test_hostile_json__spent_budget_answers_429_with_retry_after(void **state)
{
        struct srv_fixture *f = *state;
        char *body = review("", "m1", "");
        unsigned long refused = webhooks_budget_refused(f->hooks);
        struct reply r;

        assert_int_equal(webhooks_budget_take(f->hooks, SMALL_BUDGET), 0);
        post(f->port, f->ca, body, 0, &r);
        assert_int_equal(r.status, 429);
        assert_non_null(strstr(r.raw, "\r\nRetry-After: 1\r\n"));
        assert_string_equal(r.body, "too many large AdmissionReviews are being decoded at once; "
                                    "retry after 1 s\n");
        assert_int_equal(webhooks_budget_refused(f->hooks), refused + 1);
        {
                struct buf text;
                char *want = xasprintf("\ncapmaas_webhook_decode_refused_total %lu\n", refused + 1);

                buf_init(&text, 1 << 20);
                assert_int_equal(metrics_render(f->metrics, &text), 0);
                assert_non_null(strstr(text.data, want));
                buf_release(&text);
                free(want);
        }
        reply_release(&r);
        webhooks_budget_give(f->hooks, SMALL_BUDGET);
        post(f->port, f->ca, body, 0, &r);
        assert_int_equal(r.status, 200);
        reply_release(&r);
        free(body);
}

/* A review that waits is served as soon as the budget frees. */
static void test_hostile_json__waiting_review_is_served_when_the_budget_frees(void **state)
{
        struct srv_fixture *f = *state;
        char *body = review("", "m1", "");
        struct tls_conn c;
        struct reply r;

        assert_int_equal(webhooks_budget_take(f->hooks, SMALL_BUDGET), 0);
        assert_int_equal(tls_conn_open(&c, f->port, NULL, f->ca), 0);
        send_head(&c, body, strlen(body), 0);
        for (long long t0 = test_now_ms(); webhooks_budget_waiters(f->hooks) == 0;) {
                assert_true(test_now_ms() - t0 < 1500);
                (void)poll(NULL, 0, 1);
        }
        webhooks_budget_give(f->hooks, SMALL_BUDGET);
        read_reply(&c, &r);
        assert_int_equal(r.status, 200);
        assert_non_null(strstr(r.body, "\"allowed\":true"));
        reply_release(&r);
        tls_conn_close(&c);
        free(body);
}

/* A valid review carrying a string of n bytes in request.options. */
static char *padded(size_t n, size_t *ret_len)
{
        char *pad = xmalloc(n + 1), *s;

        memset(pad, 'p', n);
        pad[n] = '\0';
        s = xasprintf("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                      "\"request\":{\"options\":{\"pad\":\"%s\"},\"uid\":\"u-1\",\"kind\":{"
                      "\"group\":\"infrastructure.cluster.x-k8s.io\",\"version\":\"v1beta1\","
                      "\"kind\":\"MaasMachine\"},\"operation\":\"CREATE\",\"object\":{"
                      "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"m1\"},\"spec\":{"
                      "\"image\":\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096}}}}",
                      pad);
        free(pad);
        *ret_len = strlen(s);
        return s;
}

/* 8 reviews at once whose trees each take 70 % of the budget: each is answered, 200 or
 * 429 with Retry-After, never anything else, and the budget is whole again after. */
static void test_hostile_json__concurrent_big_reviews_share_the_budget(void **state)
{
        struct srv_fixture *f = *state;
        size_t len;
        char *b = padded(SMALL_BUDGET * 7 / 10, &len);
        struct tls_conn c[8];
        int ok = 0;

        for (int i = 0; i < 8; i++) {
                assert_int_equal(tls_conn_open(&c[i], f->port, NULL, f->ca), 0);
                send_head(&c[i], b, len, 1);
        }
        for (int i = 0; i < 8; i++)
                assert_int_equal(send_all(&c[i], b + len - 1, 1), 0);
        for (int i = 0; i < 8; i++) {
                struct reply r;

                read_reply(&c[i], &r);
                if (r.status == 429)
                        assert_non_null(strstr(r.raw, "\r\nRetry-After: 1\r\n"));
                else
                        assert_int_equal(r.status, 200);
                ok += r.status == 200;
                reply_release(&r);
                tls_conn_close(&c[i]);
        }
        assert_true(ok >= 1);
        /* nothing is left taken: the whole budget can be taken at once */
        assert_int_equal(webhooks_budget_take(f->hooks, SMALL_BUDGET), 0);
        webhooks_budget_give(f->hooks, SMALL_BUDGET);
        free(b);
}

int main(void)
{
        const struct CMUnitTest proc_tests[] = {
                cmocka_unit_test(test_hostile_json__strict_json_gets_400_naming_the_place),
                cmocka_unit_test(test_hostile_json__valid_edge_cases_still_allowed),
                cmocka_unit_test(test_hostile_json__escaped_keys_are_the_members_they_name),
                cmocka_unit_test(test_hostile_json__members_are_taken_from_request_only),
                cmocka_unit_test(test_hostile_json__budgets_get_400_naming_the_limit),
                cmocka_unit_test(
                        test_hostile_json__eight_bombs_in_flight_stay_within_idle_plus_48_mib),
        };
        const struct CMUnitTest srv_tests[] = {
                cmocka_unit_test(test_hostile_json__spent_budget_answers_429_with_retry_after),
                cmocka_unit_test(test_hostile_json__waiting_review_is_served_when_the_budget_frees),
                cmocka_unit_test(test_hostile_json__concurrent_big_reviews_share_the_budget),
        };
        int r = cmocka_run_group_tests_name("hostile_json_process", proc_tests, proc_setup,
                                            proc_teardown);

        return r | cmocka_run_group_tests_name("hostile_json_in_process", srv_tests, srv_setup,
                                               srv_teardown);
}
