/*
 * ctest: concurrency (the server runs under TSan in CI)
 * The capmaas process over real loopback sockets: TLS versions, plain HTTP refused,
 * routing and limits, certificate rotation under load, idle connections, health,
 * readiness, metrics, graceful shutdown and secret hygiene in the logs.
 */
#include <dirent.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "testutil.h"
#include "xalloc.h"

#define VALIDATE_MM "/validate-infrastructure-cluster-x-k8s-io-v1beta1-maasmachine"
#define IN_FLIGHT   "\ncontroller_runtime_webhook_requests_in_flight{webhook=\"" VALIDATE_MM "\"} "

static const char review[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"0b9a5e1c-1111-4a2b-9c3d-aabbccddeeff\",\"operation\":\"CREATE\","
        "\"kind\":{\"group\":\"infrastructure.cluster.x-k8s.io\",\"version\":\"v1beta1\","
        "\"kind\":\"MaasMachine\"},\"name\":\"m1\",\"namespace\":\"default\","
        "\"object\":{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
        "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"m1\",\"namespace\":\"default\"},"
        "\"spec\":{\"image\":\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096}}}}";

struct fixture {
        struct capmaas_proc proc;
        char ca[300];
};

static char *url(bool tls, uint16_t port, const char *path)
{
        return xasprintf("%s://127.0.0.1:%u%s", tls ? "https" : "http", port, path);
}

static int start_with(void **state, const char *cert_dir, const char *const *args)
{
        struct fixture *f = xcalloc(1, sizeof(*f));

        if (capmaas_start(&f->proc, cert_dir, args, NULL) < 0) {
                free(f);
                return -1;
        }
        (void)snprintf(f->ca, sizeof(f->ca), "%s/ca.crt", f->proc.cert_dir);
        *state = f;
        return 0;
}

static int setup(void **state)
{
        /* a 3 s request deadline: short enough for the half-open test, long enough for a
         * TLS handshake and a request under ASan on a loaded machine */
        static const char *const args[] = { "--webhook-max-body-bytes", "64Ki",
                                            "--webhook-read-timeout", "3s", NULL };

        return start_with(state, NULL, args);
}

static int teardown(void **state)
{
        struct fixture *f = *state;

        assert_int_equal(capmaas_stop(&f->proc, 10000), 0);
        free(f);
        return 0;
}

static long post_review(struct fixture *f, long tls_version, const char *path, char **ret_body)
{
        char *u = url(true, f->proc.webhook_port, path);
        struct test_http_result res;
        struct test_http req = { .url = u,
                                 .content_type = "application/json",
                                 .body = review,
                                 .ca_file = f->ca,
                                 .tls_version = tls_version };
        long status;

        (void)test_http_do(&req, &res);
        status = res.status;
        if (ret_body)
                *ret_body = xstrdup(res.body);
        test_http_result_release(&res);
        free(u);
        return status;
}

static void test_server__tls12_and_tls13_accepted(void **state)
{
        struct fixture *f = *state;
        char *body = NULL;

        assert_int_equal(post_review(f, CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2,
                                     VALIDATE_MM, &body),
                         200);
        assert_non_null(strstr(body, "\"uid\":\"0b9a5e1c-1111-4a2b-9c3d-aabbccddeeff\""));
        free(body);
        assert_int_equal(post_review(f, CURL_SSLVERSION_TLSv1_3, VALIDATE_MM, NULL), 200);
}

static void test_server__tls10_and_tls11_refused(void **state)
{
        struct fixture *f = *state;
        struct tls_conn c;

        /* Positive control: the same client code with TLS 1.2 succeeds. */
        assert_int_equal(
                tls_conn_open(&c, f->proc.webhook_port, "NORMAL:-VERS-ALL:+VERS-TLS1.2", f->ca), 0);
        tls_conn_close(&c);
        assert_true(tls_conn_open(&c, f->proc.webhook_port, "NORMAL:-VERS-ALL:+VERS-TLS1.1",
                                  f->ca) < 0);
        assert_true(tls_conn_open(&c, f->proc.webhook_port, "NORMAL:-VERS-ALL:+VERS-TLS1.0",
                                  f->ca) < 0);
}

static void test_server__plain_http_on_tls_port_refused(void **state)
{
        struct fixture *f = *state;
        char *u = url(false, f->proc.webhook_port, VALIDATE_MM);
        struct test_http_result res;
        struct test_http req = { .url = u, .content_type = "application/json", .body = review };

        assert_int_not_equal(test_http_do(&req, &res), 0);
        assert_int_not_equal(res.status, 200);
        test_http_result_release(&res);
        free(u);
}

static void test_server__routing_ignores_query_and_answers_404_405_415(void **state)
{
        struct fixture *f = *state;
        char *ok = url(true, f->proc.webhook_port, VALIDATE_MM "?timeout=10s");
        char *nope = url(true, f->proc.webhook_port, "/validate-nothing");
        struct test_http_result res;

        (void)test_http_do(&(struct test_http){ .url = ok,
                                                .content_type = "application/json",
                                                .body = review,
                                                .ca_file = f->ca },
                           &res);
        assert_int_equal(res.status, 200);
        assert_string_equal(res.content_type, "application/json");
        test_http_result_release(&res);
        (void)test_http_do(&(struct test_http){ .url = nope,
                                                .content_type = "application/json",
                                                .body = review,
                                                .ca_file = f->ca },
                           &res);
        assert_int_equal(res.status, 404);
        test_http_result_release(&res);
        (void)test_http_do(&(struct test_http){ .url = ok, .ca_file = f->ca }, &res);
        assert_int_equal(res.status, 405);
        test_http_result_release(&res);
        (void)test_http_do(
                &(struct test_http){
                        .url = ok, .content_type = "text/plain", .body = review, .ca_file = f->ca },
                &res);
        assert_int_equal(res.status, 415);
        test_http_result_release(&res);
        free(ok);
        free(nope);
}

static void test_server__body_over_cap_gets_413(void **state)
{
        struct fixture *f = *state;
        char *u = url(true, f->proc.webhook_port, VALIDATE_MM);
        size_t n = 100 * 1024; /* the fixture caps bodies at 64 KiB */
        char *big = xmalloc(n + 1);
        struct test_http_result res;

        memset(big, ' ', n);
        big[n] = '\0';
        (void)test_http_do(&(struct test_http){ .url = u,
                                                .content_type = "application/json",
                                                .body = big,
                                                .ca_file = f->ca },
                           &res);
        assert_int_equal(res.status, 413);
        test_http_result_release(&res);
        (void)test_http_do(&(struct test_http){ .url = u,
                                                .content_type = "application/json",
                                                .body = big,
                                                .ca_file = f->ca,
                                                .chunked = true },
                           &res);
        assert_int_equal(res.status, 413);
        test_http_result_release(&res);
        free(big);
        free(u);
}

static void test_server__idle_half_open_connection_dropped(void **state)
{
        struct fixture *f = *state;
        int fd = tcp_connect(f->proc.webhook_port);

        /* Half a TLS record header, then silence: the 3 s request deadline must close it. */
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "\x16\x03", 2), 2);
        assert_true(tcp_wait_closed(fd, 8000));
        close(fd);
}

static void test_server__malformed_review_gets_400_with_reason(void **state)
{
        struct fixture *f = *state;
        char *u = url(true, f->proc.webhook_port, VALIDATE_MM);
        struct test_http_result res;

        (void)test_http_do(&(struct test_http){ .url = u,
                                                .content_type = "application/json",
                                                .body = "{\"kind\":\"AdmissionReview\"",
                                                .ca_file = f->ca },
                           &res);
        assert_int_equal(res.status, 400);
        assert_non_null(strstr(res.body, "not valid JSON"));
        test_http_result_release(&res);
        free(u);
}

static void test_server__health_and_readiness_formats(void **state)
{
        struct fixture *f = *state;
        long st;
        char *b;

        b = test_http_get(f->proc.health_port, "/healthz", &st);
        assert_int_equal(st, 200);
        assert_string_equal(b, "ok");
        free(b);
        b = test_http_get(f->proc.health_port, "/readyz?verbose", &st);
        assert_int_equal(st, 200);
        assert_string_equal(b, "[+]ping ok\n[+]webhook ok\nreadyz check passed\n");
        free(b);
        b = test_http_get(f->proc.health_port, "/readyz?verbose&exclude=webhook", &st);
        assert_string_equal(b, "[+]ping ok\nreadyz check passed\n");
        free(b);
        b = test_http_get(f->proc.health_port, "/readyz/webhook", &st);
        assert_int_equal(st, 200);
        free(b);
        b = test_http_get(f->proc.health_port, "/healthz/nothing", &st);
        assert_int_equal(st, 404);
        free(b);
}

/* notAfter of the PEM certificate in path, Unix seconds. */
static long long cert_not_after(const char *path)
{
        gnutls_datum_t pem = { 0 };
        gnutls_x509_crt_t crt;
        time_t t;

        assert_int_equal(gnutls_load_file(path, &pem), 0);
        assert_int_equal(gnutls_x509_crt_init(&crt), 0);
        assert_int_equal(gnutls_x509_crt_import(crt, &pem, GNUTLS_X509_FMT_PEM), 0);
        t = gnutls_x509_crt_get_expiration_time(crt);
        gnutls_x509_crt_deinit(crt);
        gnutls_free(pem.data);
        return (long long)t;
}

static void test_server__metrics_count_webhook_requests(void **state)
{
        struct fixture *f = *state;
        char want[128], crt[320];
        long st;
        char *b;

        assert_int_equal(post_review(f, 0, VALIDATE_MM, NULL), 200);
        assert_int_equal(post_review(f, 0, VALIDATE_MM, NULL), 200);
        b = test_http_get(f->proc.metrics_port, "/metrics", &st);
        assert_int_equal(st, 200);
        assert_non_null(strstr(b, "# TYPE process_resident_memory_bytes gauge\n"));
        assert_non_null(strstr(b, "process_open_fds "));
        assert_non_null(strstr(b, "process_cpu_seconds_total "));
        assert_non_null(strstr(b, "process_start_time_seconds "));
        /* the serving certificate's expiry, for an alert well before it runs out */
        (void)snprintf(crt, sizeof(crt), "%s/tls.crt", f->proc.cert_dir);
        (void)snprintf(want, sizeof(want),
                       "\ncapmaas_webhook_certificate_expiry_timestamp_seconds %lld\n",
                       cert_not_after(crt));
        assert_non_null(strstr(b, want));
        assert_non_null(strstr(b, "controller_runtime_webhook_requests_total{webhook=\"" VALIDATE_MM
                                  "\",code=\"200\"} "));
        assert_non_null(
                strstr(b, "controller_runtime_webhook_latency_seconds_bucket{webhook=\"" VALIDATE_MM
                          "\",le=\"+Inf\"} "));
        free(b);
        /* The gauge drops once the server has finished the connection's request, which may
         * be a moment after the client has its answer. */
        assert_true(test_http_wait_for(f->proc.metrics_port, "/metrics", IN_FLIGHT "0\n", 1000));
}

/* A new connection to port is refused within timeout_ms. */
static bool tcp_refused_within(uint16_t port, unsigned timeout_ms)
{
        for (long long t0 = test_now_ms(); test_now_ms() - t0 < timeout_ms;) {
                int fd = tcp_connect(port);

                if (fd < 0)
                        return true;
                close(fd);
                usleep(10 * 1000);
        }
        return false;
}

/* The serial of the certificate the webhook port serves now. */
static void served_serial(struct fixture *f, char out[64])
{
        struct tls_conn c;

        assert_int_equal(tls_conn_open(&c, f->proc.webhook_port, NULL, f->ca), 0);
        tls_conn_peer_serial(&c, out);
        tls_conn_close(&c);
}

/* n webhook requests, every other one on the kept-alive connection; the failures. */
static int review_burst(struct fixture *f, const char *u, CURL *keepalive, int n)
{
        int failures = 0;

        for (int i = 0; i < n; i++) {
                struct test_http_result res;

                (void)test_http_do(&(struct test_http){ .url = u,
                                                        .content_type = "application/json",
                                                        .body = review,
                                                        .ca_file = f->ca,
                                                        .curl = i % 2 ? keepalive : NULL },
                                   &res);
                failures += res.status != 200;
                test_http_result_release(&res);
        }
        return failures;
}

/* Two rotations, each while requests keep coming until the new certificate is served
 * (without a restart: the watcher polls every 1 s); not one request fails. */
static void test_server__certificate_rotation_loses_no_request(void **state)
{
        char dir[64];
        const char *src = test_env("CAPMAAS_SOURCE_DIR");
        struct fixture *f;
        char before[64];
        char serial[64];
        int failures;
        CURL *keepalive = curl_easy_init();
        char *u;

        (void)state;
        test_mkdtemp(dir, sizeof(dir));
        assert_int_equal(test_sh("%s/certs/gen-dev-certs.sh %s >/dev/null", src, dir), 0);
        assert_int_equal(start_with((void **)&f, dir, NULL), 0);
        u = url(true, f->proc.webhook_port, VALIDATE_MM);
        failures = review_burst(f, u, keepalive, 20);
        for (int round = 0; round < 2; round++) {
                served_serial(f, before);
                assert_int_equal(
                        test_sh("%s/certs/gen-dev-certs.sh --keep-ca %s >/dev/null &", src, dir),
                        0);
                for (long long t0 = test_now_ms(); test_now_ms() - t0 < 10000;) {
                        failures += review_burst(f, u, keepalive, 10);
                        served_serial(f, serial);
                        if (strcmp(serial, before) != 0)
                                break;
                }
                assert_string_not_equal(serial, before);
        }
        failures += review_burst(f, u, keepalive, 20);
        assert_int_equal(failures, 0);
        curl_easy_cleanup(keepalive);
        free(u);
        assert_int_equal(capmaas_stop(&f->proc, 10000), 0);
        free(f);
        (void)test_sh("rm -rf %s", dir);
}

static void test_server__sigterm_lets_in_flight_request_finish(void **state)
{
        struct fixture *f;
        struct tls_conn c;
        size_t half = sizeof(review) / 2;
        char *head;
        char *reply = NULL;

        (void)state;
        assert_int_equal(start_with((void **)&f, NULL, NULL), 0);
        assert_int_equal(tls_conn_open(&c, f->proc.webhook_port, NULL, f->ca), 0);
        head = xasprintf("POST " VALIDATE_MM " HTTP/1.1\r\nHost: x\r\n"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                         "Connection: close\r\n\r\n",
                         sizeof(review) - 1);
        assert_int_equal(tls_conn_send(&c, head, strlen(head)), 0);
        assert_int_equal(tls_conn_send(&c, review, half), 0);
        /* the server has the request (headers and half the body) in hand */
        assert_true(test_http_wait_for(f->proc.metrics_port, "/metrics", IN_FLIGHT "1\n", 5000));
        assert_int_equal(kill(f->proc.pid, SIGTERM), 0);
        /* Stops accepting: a new connection is refused while the old one is served. */
        assert_true(tcp_refused_within(f->proc.webhook_port, 5000));
        assert_int_equal(tls_conn_send(&c, review + half, sizeof(review) - 1 - half), 0);
        (void)tls_conn_recv_all(&c, 5000, &reply);
        assert_non_null(strstr(reply, "HTTP/1.1 200"));
        assert_non_null(strstr(reply, "\"allowed\":true"));
        tls_conn_close(&c);
        assert_int_equal(capmaas_stop(&f->proc, 10000), 0);
        free(reply);
        free(head);
        free(f);
}

/* An idle keep-alive connection (the API server keeps its webhook connections open) has
 * nothing to finish: SIGTERM closes it and exits at once instead of waiting for the client
 * or the read timeout (30 s here) to end it. */
static void test_server__sigterm_does_not_wait_for_idle_keep_alive(void **state)
{
        static const char *const args[] = { "--webhook-read-timeout", "30s", NULL };
        struct fixture *f;
        struct tls_conn c;
        char *head;
        char *reply = NULL;

        (void)state;
        assert_int_equal(start_with((void **)&f, NULL, args), 0);
        assert_int_equal(tls_conn_open(&c, f->proc.webhook_port, NULL, f->ca), 0);
        head = xasprintf("POST " VALIDATE_MM " HTTP/1.1\r\nHost: x\r\n"
                         "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                         sizeof(review) - 1, review);
        assert_int_equal(tls_conn_send(&c, head, strlen(head)), 0);
        (void)tls_conn_recv_until(&c, "\"allowed\":true", 5000, &reply);
        assert_non_null(strstr(reply, "HTTP/1.1 200"));
        assert_non_null(strstr(reply, "\"allowed\":true"));
        /* the connection stays open and idle; exit 0 well before the read timeout */
        assert_int_equal(capmaas_stop(&f->proc, 5000), 0);
        tls_conn_close(&c);
        free(reply);
        free(head);
        free(f);
}

static void test_server__api_key_never_logged(void **state)
{
        static const char *const args[] = { "-v", "5", NULL };
        char key[] = "MAAS_API_KEY=consumerkey:tokenkey:Sup3rS3cretTokenSecret";
        char endpoint[] = "MAAS_ENDPOINT=http://127.0.0.1:5240/MAAS";
        char *env[] = { key, endpoint, NULL };
        struct capmaas_proc p;
        char *log;

        (void)state;
        assert_int_equal(capmaas_start(&p, NULL, args, env), 0);
        assert_int_equal(capmaas_stop(&p, 10000), 0);
        log = capmaas_log(&p);
        assert_non_null(strstr(log, "serving"));
        assert_null(strstr(log, "Sup3rS3cretTokenSecret"));
        assert_null(strstr(log, "consumerkey:tokenkey"));
        free(log);
}

/* Threads of process pid whose name is `name` (MHD names its pool threads "MHD-worker"). */
static unsigned threads_named(pid_t pid, const char *name)
{
        char dir[64], path[384], comm[64];
        struct dirent *e;
        unsigned n = 0;
        DIR *d;
        FILE *f;

        (void)snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
        d = opendir(dir);
        assert_non_null(d);
        while ((e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.')
                        continue;
                (void)snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
                f = fopen(path, "r");
                if (!f)
                        continue;
                if (fgets(comm, sizeof comm, f) && strncmp(comm, name, strlen(name)) == 0 &&
                    comm[strlen(name)] == '\n')
                        n++;
                fclose(f);
        }
        closedir(d);
        return n;
}

/* Starts capmaas with args, returns the webhook_threads its "serving" line reports and
 * the number of MHD pool threads it runs. */
static void threads_of(const char *const *args, unsigned *logged, unsigned *workers)
{
        struct capmaas_proc p;
        char *log, *at;

        assert_int_equal(capmaas_start(&p, NULL, args, NULL), 0);
        log = capmaas_log(&p);
        at = strstr(log, "\"webhook_threads\":\"");
        assert_non_null(at);
        *logged = (unsigned)strtoul(at + strlen("\"webhook_threads\":\""), NULL, 10);
        free(log);
        /* A pool thread names itself once it runs, which may be just after "listening":
         * wait (bounded) for the count the log announces before taking it. */
        for (long long t0 = test_now_ms(); test_now_ms() - t0 < 5000; usleep(20 * 1000)) {
                *workers = threads_named(p.pid, "MHD-worker");
                if (*workers == (*logged > 1 ? *logged : 0))
                        break;
        }
        assert_int_equal(capmaas_stop(&p, 10000), 0);
}

/* By default the webhook server runs one event loop per CPU capmaas may use: pinned to one
 * CPU (as taskset or a 1-CPU limit would), one loop and no pool; --webhook-threads wins. */
static void test_server__webhook_threads_follow_the_cpus_given(void **state)
{
        static const char *const three[] = { "--webhook-threads", "3", NULL };
        cpu_set_t all;
        unsigned logged, workers;

        (void)state;
        assert_int_equal(test_pin_to_one_cpu(&all), 0);
        threads_of(NULL, &logged, &workers);
        assert_int_equal(test_restore_cpus(&all), 0);
        assert_int_equal(logged, 1);
        assert_int_equal(workers, 0);

        threads_of(three, &logged, &workers);
        assert_int_equal(logged, 3);
        assert_int_equal(workers, 3);
        if (CPU_COUNT(&all) >= 2) { /* unpinned on this machine: one loop per CPU, up to 4 */
                threads_of(NULL, &logged, &workers);
                assert_true(logged >= 2 && logged <= 4);
                assert_int_equal(workers, logged);
        }
}

static void test_server__bad_configuration_exits_2_naming_the_flag(void **state)
{
        (void)state;
        assert_int_equal(test_sh("%s --webhooks-only --webhook-port=notaport 2>&1 | "
                                 "grep -q -- '--webhook-port: invalid value'",
                                 test_env("CAPMAAS_BIN")),
                         0);
        assert_int_equal(test_sh("%s --webhooks-only --webhook-port=notaport 2>/dev/null",
                                 test_env("CAPMAAS_BIN")),
                         2);
        /* A MAAS endpoint without a key (or a malformed key) is a start-up error. */
        assert_int_equal(test_sh("MAAS_ENDPOINT=http://127.0.0.1:5240/MAAS %s --webhooks-only "
                                 "2>&1 | grep -q 'MAAS_API_KEY is not set'",
                                 test_env("CAPMAAS_BIN")),
                         0);
        assert_int_equal(test_sh("MAAS_ENDPOINT=http://127.0.0.1:5240/MAAS MAAS_API_KEY=abc "
                                 "%s --webhooks-only >/dev/null 2>&1",
                                 test_env("CAPMAAS_BIN")),
                         2);
        /* Missing certificates are a start-up error, not a crash. */
        assert_int_equal(test_sh("%s --webhooks-only --webhook-port 0 --health-addr 0 "
                                 "--metrics-bind-addr 0 --webhook-cert-dir /nonexistent "
                                 ">/dev/null 2>&1",
                                 test_env("CAPMAAS_BIN")),
                         1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_server__tls12_and_tls13_accepted),
                cmocka_unit_test(test_server__tls10_and_tls11_refused),
                cmocka_unit_test(test_server__plain_http_on_tls_port_refused),
                cmocka_unit_test(test_server__routing_ignores_query_and_answers_404_405_415),
                cmocka_unit_test(test_server__body_over_cap_gets_413),
                cmocka_unit_test(test_server__idle_half_open_connection_dropped),
                cmocka_unit_test(test_server__malformed_review_gets_400_with_reason),
                cmocka_unit_test(test_server__health_and_readiness_formats),
                cmocka_unit_test(test_server__metrics_count_webhook_requests),
        };

        const struct CMUnitTest lifecycle[] = {
                cmocka_unit_test(test_server__certificate_rotation_loses_no_request),
                cmocka_unit_test(test_server__sigterm_lets_in_flight_request_finish),
                cmocka_unit_test(test_server__sigterm_does_not_wait_for_idle_keep_alive),
                cmocka_unit_test(test_server__api_key_never_logged),
                cmocka_unit_test(test_server__webhook_threads_follow_the_cpus_given),
                cmocka_unit_test(test_server__bad_configuration_exits_2_naming_the_flag),
        };
        int r;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = cmocka_run_group_tests_name("server", tests, setup, teardown);
        r += cmocka_run_group_tests_name("server_lifecycle", lifecycle, NULL, NULL);
        curl_global_cleanup();
        return r;
}
