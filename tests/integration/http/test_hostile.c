/*
 * hostile: http_server against clients that misbehave, over real loopback sockets (TLS for
 * the webhook-like listener, plain for the health listener and the framing cases). The
 * deadlines are small (400 ms for the headers, 1200 ms for the request) and the idle timeout
 * long (10 s), so a test that passes only because of the idle timer would time out first.
 * ctest: concurrency (the server's accept, event-loop and sweeper threads share the guard).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "certstore.h"
#include "health.h"
#include "http_server.h"
#include "log.h"
#include "router.h"
#include "testutil.h"
#include "xalloc.h"

#define HEADER_MS       400
#define REQUEST_MS      1200
/* The limit tests: long enough for a test's connections to stay, and a connection may be
 * evicted once it has been receiving for a fifth of it (400 ms). */
#define LIMIT_HEADER_MS 2000

struct fixture {
        struct router *router;
        struct health *health;
        struct certstore *certs;
        struct http_server *server;
        size_t bodies_in_flight; /* the server's budget of bodies; 0 = its default */
        char ca[512];
};

static void serve_ok(void *ud, const struct http_request *req, struct http_response *resp)
{
        (void)ud;
        (void)req;
        resp->status = 200;
        resp->body = xstrdup("ok");
        resp->body_len = 2;
}

/* Set by a test once its client has reset the connection /late was asked on. */
static atomic_bool client_gone;

/* Answers once the client is gone (bounded), so the answer is written to a reset socket. */
static void serve_late(void *ud, const struct http_request *req, struct http_response *resp)
{
        long long end = test_now_ms() + 3000;

        (void)ud;
        (void)req;
        while (!atomic_load(&client_gone) && test_now_ms() < end)
                (void)poll(NULL, 0, 5);
        resp->status = 200;
        resp->body = xstrdup("late");
        resp->body_len = 4;
}

static struct fixture *fixture_new(void)
{
        struct fixture *f = xcalloc(1, sizeof(*f));

        assert_int_equal(router_new(&f->router), 0);
        assert_int_equal(router_add(f->router, &(struct route){ .path = "/ok",
                                                                .method = "GET",
                                                                .fn = serve_ok,
                                                                .flags = ROUTE_PREFIX }),
                         0);
        assert_int_equal(
                router_add(f->router,
                           &(struct route){ .path = "/ok", .method = "POST", .fn = serve_ok }),
                0);
        assert_int_equal(
                router_add(f->router,
                           &(struct route){ .path = "/late", .method = "GET", .fn = serve_late }),
                0);
        assert_int_equal(health_new(&f->health), 0);
        assert_int_equal(health_add_check(f->health, HEALTH_LIVE, "ping", health_check_ping, NULL),
                         0);
        assert_int_equal(health_register_routes(f->health, f->router), 0);
        router_freeze(f->router);
        return f;
}

/* Starts the server: TLS when tls, with the given limits; header_ms 0 = HEADER_MS (the
 * limit tests take longer, so that no connection meets its deadline meanwhile). */
static void fixture_start(
        struct fixture *f, bool tls, unsigned max_conn, unsigned per_addr, uint64_t header_ms)
{
        struct http_server_opts o = {
                .name = "test",
                .host = "127.0.0.1",
                .router = f->router,
                .threads = 1,
                .max_connections = max_conn,
                .max_connections_per_address = per_addr,
                .max_body_bytes = 64 * 1024,
                .max_body_bytes_in_flight = f->bodies_in_flight,
                .read_timeout_s = 10,
                .read_timeout_ms = header_ms ? 2 * header_ms : REQUEST_MS,
                .read_header_timeout_ms = header_ms ? header_ms : HEADER_MS,
        };
        char *err = NULL;

        if (tls) {
                const char *dir = test_env("CAPMAAS_TEST_CERTS");
                char *cert = xasprintf("%s/tls.crt", dir);
                char *key = xasprintf("%s/tls.key", dir);

                (void)snprintf(f->ca, sizeof(f->ca), "%s/ca.crt", dir);
                assert_int_equal(certstore_new(&(struct certstore_opts){ .cert_path = cert,
                                                                         .key_path = key },
                                               &f->certs, &err),
                                 0);
                free(cert);
                free(key);
                o.certs = f->certs;
        }
        if (http_server_start(&o, &f->server, &err) != 0)
                fail_msg("start: %s", err);
}

static void fixture_free(struct fixture *f)
{
        http_server_free(f->server);
        certstore_free(f->certs);
        health_free(f->health);
        router_free(f->router);
        free(f);
}

/* A plain TCP connection to port from a loopback address ("127.0.0.2" is another client). */
static int connect_from(const char *from, uint16_t port)
{
        struct sockaddr_in src = { .sin_family = AF_INET };
        struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(port) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        assert_int_equal(inet_pton(AF_INET, from, &src.sin_addr), 1);
        dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
        return fd;
}

static void send_all(int fd, const char *s)
{
        assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Reads until the peer closes (true) or timeout_ms passes (false); *ret gets the bytes. */
static bool read_to_close(int fd, unsigned timeout_ms, char **ret)
{
        size_t len = 0;
        char *out = xcalloc(1, 1);
        long long end = test_now_ms() + timeout_ms;
        bool closed = false;

        while (test_now_ms() < end) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                char chunk[4096];
                ssize_t n;

                if (poll(&p, 1, 50) <= 0)
                        continue;
                n = recv(fd, chunk, sizeof(chunk), 0);
                if (n <= 0) {
                        closed = true;
                        break;
                }
                out = xrealloc(out, len + (size_t)n + 1);
                memcpy(out + len, chunk, (size_t)n);
                len += (size_t)n;
                out[len] = '\0';
        }
        *ret = out;
        return closed;
}

static unsigned count_substr(const char *s, const char *needle)
{
        unsigned n = 0;

        for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
                n++;
        return n;
}

/* Waits until the server counts n connections. */
static void wait_open(struct fixture *f, unsigned n)
{
        long long end = test_now_ms() + 5000;

        while (http_server_open_connections(f->server) != n && test_now_ms() < end)
                (void)poll(NULL, 0, 5);
        assert_int_equal(http_server_open_connections(f->server), n);
}

static void get_ok(uint16_t port)
{
        long status = 0;
        char *body = test_http_get(port, "/ok", &status);

        assert_int_equal(status, 200);
        free(body);
}

/* TLS completed, then one header byte every 100 ms: the idle timer (10 s) never fires,
 * the header deadline does. */
static void test_slow_headers_closed_at_deadline(void **state)
{
        struct fixture *f = fixture_new();
        struct tls_conn c;
        long long start;
        bool closed = false;

        (void)state;
        fixture_start(f, true, 64, 64, 0);
        assert_int_equal(tls_conn_open(&c, http_server_port(f->server), NULL, f->ca), 0);
        start = test_now_ms();
        assert_int_equal(tls_conn_send(&c, "GET /ok HTTP/1.1\r\nHost: x\r\n", 27), 0);
        while (!closed && test_now_ms() - start < 4000) {
                closed = tls_conn_send(&c, "X", 1) != 0;
                (void)poll(NULL, 0, 100);
                closed = closed || http_server_open_connections(f->server) == 0;
        }
        print_message("slow headers closed after %lld ms (deadline %d ms)\n", test_now_ms() - start,
                      HEADER_MS);
        assert_true(closed);
        assert_true(test_now_ms() - start < 3000);
        /* Writing on to the closed connection meets its reset (ECONNRESET), then EPIPE, and
         * the close_notify of tls_conn_close meets EPIPE again: errors this client sees, never
         * a SIGPIPE ending the process (tls_conn asks GnuTLS for MSG_NOSIGNAL; without it this
         * test died of SIGPIPE whenever a slow machine let the loop above write once more). */
        wait_open(f, 0);
        for (int i = 0; i < 3; i++)
                (void)tls_conn_send(&c, "X", 1);
        tls_conn_close(&c);
        /* A prompt client on a new connection is served. */
        assert_int_equal(tls_conn_open(&c, http_server_port(f->server), NULL, f->ca), 0);
        {
                char *got = NULL;

                assert_int_equal(tls_conn_send(&c, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", 29), 0);
                (void)tls_conn_recv_until(&c, "\r\n\r\nok", 3000, &got);
                assert_non_null(strstr(got, "HTTP/1.1 200"));
                free(got);
        }
        tls_conn_close(&c);
        fixture_free(f);
}

/* Headers at once, then the body one byte every 100 ms: closed at the request deadline
 * without an answer. */
static void test_slow_body_closed_at_request_deadline(void **state)
{
        struct fixture *f = fixture_new();
        long long start = test_now_ms();
        bool closed = false;
        int fd;

        (void)state;
        fixture_start(f, false, 64, 64, 0);
        fd = connect_from("127.0.0.1", http_server_port(f->server));
        send_all(fd, "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
        while (!closed && test_now_ms() - start < 5000) {
                char *got = NULL;

                closed = send(fd, "x", 1, MSG_NOSIGNAL) != 1 || read_to_close(fd, 100, &got);
                if (got)
                        assert_null(strstr(got, "200 OK"));
                free(got);
        }
        print_message("slow body closed after %lld ms (deadline %d ms)\n", test_now_ms() - start,
                      REQUEST_MS);
        assert_true(closed);
        assert_true(test_now_ms() - start >= REQUEST_MS - 100);
        assert_true(test_now_ms() - start < 4000);
        close(fd);
        fixture_free(f);
}

/* A slow connection from `from`: the request line, never the end of the headers. */
static int slow_conn(const char *from, uint16_t port)
{
        int fd = connect_from(from, port);

        send_all(fd, "GET /ok HTTP/1.1\r\n");
        return fd;
}

/* Past the per-address limit a newcomer from that address is refused before anything is
 * read, and the connections it already has stay, unless one of them is idle: that one makes
 * room. Another address is not touched. */
static void test_per_address_limit(void **state)
{
        struct fixture *f = fixture_new();
        uint16_t port;
        int other;
        int fds[5];
        char *got = NULL;

        (void)state;
        fixture_start(f, false, 64, 4, LIMIT_HEADER_MS);
        port = http_server_port(f->server);
        other = slow_conn("127.0.0.3", port);
        wait_open(f, 1);
        for (int i = 0; i < 4; i++) {
                fds[i] = slow_conn("127.0.0.2", port);
                wait_open(f, (unsigned)i + 2);
        }
        fds[4] = slow_conn("127.0.0.2", port);
        assert_true(read_to_close(fds[4], 2000, &got)); /* refused */
        free(got);
        close(fds[4]);
        for (int i = 0; i < 4; i++) {
                assert_false(read_to_close(fds[i], 50, &got));
                free(got);
        }
        /* fds[0] finishes its request and stays open, idle: the next newcomer takes its
         * place. */
        send_all(fds[0], "Host: x\r\n\r\n");
        assert_false(read_to_close(fds[0], 300, &got));
        assert_non_null(strstr(got, "HTTP/1.1 200"));
        free(got);
        fds[4] = slow_conn("127.0.0.2", port);
        assert_true(read_to_close(fds[0], 2000, &got));
        free(got);
        assert_false(read_to_close(fds[4], 50, &got));
        free(got);
        send_all(other, "Host: x\r\n\r\n");
        assert_false(read_to_close(other, 300, &got));
        assert_non_null(strstr(got, "HTTP/1.1 200"));
        free(got);
        for (int i = 0; i < 5; i++)
                close(fds[i]);
        close(other);
        fixture_free(f);
}

/* GET /ok until it is answered 200 or 3 s pass; returns how many attempts failed first. */
static unsigned get_ok_soon(uint16_t port)
{
        long long end = test_now_ms() + 3000;
        unsigned failed = 0;

        while (test_now_ms() < end) {
                long status = 0;
                char *body = test_http_get(port, "/ok", &status);

                free(body);
                if (status == 200)
                        return failed;
                failed++;
                (void)poll(NULL, 0, 50);
        }
        fail_msg("never served");
        return failed;
}

/* The listener is full of connections that never finish their headers: a new client is
 * served, and the oldest of them is the one closed. */
static void test_oldest_evicted_at_cap(void **state)
{
        struct fixture *f = fixture_new();
        uint16_t port;
        int fds[4];
        char *got = NULL;

        (void)state;
        fixture_start(f, false, 4, 64, LIMIT_HEADER_MS);
        port = http_server_port(f->server);
        for (int i = 0; i < 4; i++) {
                fds[i] = slow_conn("127.0.0.2", port);
                wait_open(f, (unsigned)i + 1);
        }
        print_message("served after %u refusals\n", get_ok_soon(port));
        assert_true(read_to_close(fds[0], 2000, &got));
        free(got);
        for (int i = 1; i < 4; i++) {
                assert_false(read_to_close(fds[i], 50, &got));
                free(got);
        }
        get_ok(port); /* the next one at once: the oldest slow one is old enough now */
        assert_true(read_to_close(fds[1], 2000, &got));
        free(got);
        for (int i = 0; i < 4; i++)
                close(fds[i]);
        fixture_free(f);
}

/* 150 slow clients against the health listener's limits (64, 32 per address): once they
 * have been at it a while, every probe is answered at once. */
static void test_healthz_under_slow_clients(void **state)
{
        struct fixture *f = fixture_new();
        int fds[150];
        unsigned ok = 0;
        uint16_t port;

        (void)state;
        fixture_start(f, false, 64, 32, LIMIT_HEADER_MS);
        port = http_server_port(f->server);
        for (int i = 0; i < 150; i++) {
                fds[i] = connect_from(i % 2 ? "127.0.0.2" : "127.0.0.4", port);
                send_all(fds[i], "GET /healthz HTTP/1.1\r\nHost: x\r\n");
        }
        (void)get_ok_soon(port);
        for (int i = 0; i < 10; i++) {
                long status = 0;
                char *body = test_http_get(port, "/healthz", &status);

                ok += status == 200;
                free(body);
        }
        print_message("/healthz answered %u of 10 under 150 slow clients\n", ok);
        assert_int_equal(ok, 10);
        for (int i = 0; i < 150; i++)
                close(fds[i]);
        fixture_free(f);
}

struct framing_case {
        const char *name;
        const char *request;
        const char *status; /* the one status line expected */
};

static const struct framing_case framing_cases[] = {
        { "length and chunked",
          "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
          "0\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n",
          "HTTP/1.1 400" },
        { "two lengths",
          "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 30\r\n\r\n"
          "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n",
          "HTTP/1.1 400" },
        { "two equal lengths",
          "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
          "HTTP/1.1 400" },
        { "unknown coding", "POST /ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo\r\n\r\n",
          "HTTP/1.1 501" },
        { "gzip coding", "POST /ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
          "HTTP/1.1 400" },
        { "chunked twice",
          "POST /ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
          "HTTP/1.1 400" },
        { "two coding fields",
          "POST /ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
          "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
          "HTTP/1.1 400" },
        { "space before colon", "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length : 3\r\n\r\nabc",
          "HTTP/1.1 400" },
        { "no host", "GET /ok HTTP/1.1\r\n\r\n", "HTTP/1.1 400" },
        { "nul in path", "GET /ok%00/x HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400" },
        { "escaped path", "GET /%6Fk HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
          "HTTP/1.1 200" },
        { "404 with a body", "POST /nope HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
          "HTTP/1.1 404" },
};

static void expect_one_answer(uint16_t port,
                              const char *name,
                              const char *request,
                              const char *want)
{
        long long start = test_now_ms();
        int fd = connect_from("127.0.0.1", port);
        char *got = NULL;
        bool closed;

        send_all(fd, request);
        closed = read_to_close(fd, 3000, &got);
        print_message("%-20s -> %.12s in %lld ms\n", name, got, test_now_ms() - start);
        if (strncmp(got, want, strlen(want)) != 0)
                fail_msg("%s: got \"%s\", want %s", name, got, want);
        if (count_substr(got, "HTTP/1.") != 1)
                fail_msg("%s: %u status lines in \"%s\"", name, count_substr(got, "HTTP/1."), got);
        if (!closed)
                fail_msg("%s: connection left open", name);
        close(fd);
        free(got);
}

static void test_framing(void **state)
{
        struct fixture *f = fixture_new();

        (void)state;
        fixture_start(f, false, 64, 64, 0);
        for (size_t i = 0; i < ARRAY_SIZE(framing_cases); i++)
                expect_one_answer(http_server_port(f->server), framing_cases[i].name,
                                  framing_cases[i].request, framing_cases[i].status);
        fixture_free(f);
}

/* 250 query arguments, or a target over 4 KiB: 414 at once (not at the 10 s idle timeout),
 * one status line, closed. 32 arguments are fine. */
static void test_query_limits(void **state)
{
        struct fixture *f = fixture_new();

        struct buf_like {
                char s[16384];
                size_t n;
        } *b = xcalloc(1, sizeof(*b));

        uint16_t port;
        long status = 0;
        char *body;

        (void)state;
        fixture_start(f, false, 64, 64, 0);
        port = http_server_port(f->server);
        b->n = (size_t)snprintf(b->s, sizeof(b->s), "GET /ok?");
        for (int i = 0; i < 250; i++)
                b->n += (size_t)snprintf(b->s + b->n, sizeof(b->s) - b->n, "%sa%d=1", i ? "&" : "",
                                         i);
        (void)snprintf(b->s + b->n, sizeof(b->s) - b->n, " HTTP/1.1\r\nHost: x\r\n\r\n");
        expect_one_answer(port, "250 arguments", b->s, "HTTP/1.1 414");
        b->n = (size_t)snprintf(b->s, sizeof(b->s), "GET /ok/");
        memset(b->s + b->n, 'a', 5000);
        (void)snprintf(b->s + b->n + 5000, sizeof(b->s) - b->n - 5000,
                       " HTTP/1.1\r\nHost: x\r\n\r\n");
        expect_one_answer(port, "long target", b->s, "HTTP/1.1 414");
        b->n = (size_t)snprintf(b->s, sizeof(b->s), "/ok?");
        for (int i = 0; i < 32; i++)
                b->n += (size_t)snprintf(b->s + b->n, sizeof(b->s) - b->n, "%sa%d=1", i ? "&" : "",
                                         i);
        body = test_http_get(port, b->s, &status);
        assert_int_equal(status, 200);
        free(body);
        free(b);
        fixture_free(f);
}

/* The connection's default 8 KiB pool (a connection holds no more for its headers): what
 * kube-apiserver and a bearer token send is served, headers past the pool are answered 431
 * and the connection closed. */
static void test_header_sizes(void **state)
{
        struct fixture *f = fixture_new();
        size_t cap = 32768;
        char *req = xmalloc(cap);
        uint16_t port;
        int n;

        (void)state;
        fixture_start(f, false, 64, 64, 0);
        port = http_server_port(f->server);
        n = snprintf(req, cap, "GET /ok HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ");
        memset(req + n, 'a', 6000);
        (void)snprintf(req + n + 6000, cap - (size_t)n - 6000, "\r\nConnection: close\r\n\r\n");
        expect_one_answer(port, "6 KB of headers", req, "HTTP/1.1 200");
        for (size_t big = 10000; big <= 20000; big += 10000) {
                n = snprintf(req, cap, "GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: ");
                memset(req + n, 'a', big);
                (void)snprintf(req + n + big, cap - (size_t)n - big, "\r\n\r\n");
                expect_one_answer(port, big == 10000 ? "10 KB of headers" : "20 KB of headers", req,
                                  "HTTP/1.1 431");
        }
        free(req);
        fixture_free(f);
}

/* Reloads are logged with the new subject and expiry; a failed one at warn, once; a key
 * anyone may read is warned about unless it sits on a Kubernetes Secret volume. */
static void test_certificate_logs(void **state)
{
        const char *src = test_env("CAPMAAS_TEST_CERTS");
        char dir[256];
        char logf[300];
        char *cert;
        char *key;
        char *text = NULL;
        struct certstore *cs = NULL;
        char *err = NULL;
        int fd;

        (void)state;
        test_mkdtemp(dir, sizeof(dir));
        (void)snprintf(logf, sizeof(logf), "%s/log", dir);
        fd = open(logf, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        log_setup(LOG_FORMAT_TEXT, 0, fd);
        assert_int_equal(test_sh("cp %s/tls.crt %s/tls.crt && cp %s/tls.key %s/tls.key && "
                                 "chmod 644 %s/tls.key",
                                 src, dir, src, dir, dir),
                         0);
        cert = xasprintf("%s/tls.crt", dir);
        key = xasprintf("%s/tls.key", dir);
        assert_int_equal(
                certstore_new(&(struct certstore_opts){ .cert_path = cert, .key_path = key }, &cs,
                              &err),
                0);
        /* A broken certificate: warned once, however many polls see it. */
        assert_int_equal(test_sh("echo garbage > %s/tls.crt.new && mv %s/tls.crt.new %s/tls.crt",
                                 dir, dir, dir),
                         0);
        assert_false(certstore_reload_if_changed(cs));
        assert_false(certstore_reload_if_changed(cs));
        /* The pair again, group-writable this time. */
        assert_int_equal(test_sh("cp %s/tls.crt %s/tls.crt.new && mv %s/tls.crt.new %s/tls.crt && "
                                 "chmod 664 %s/tls.key",
                                 src, dir, dir, dir, dir),
                         0);
        assert_true(certstore_reload_if_changed(cs));
        cs = certstore_free(cs);
        /* The kubelet's layout: files behind ..data, 0644 by design. */
        assert_int_equal(test_sh("mkdir -p %s/vol/..2026_01_01 && cp %s/tls.crt %s/tls.key "
                                 "%s/vol/..2026_01_01/ && chmod 644 %s/vol/..2026_01_01/tls.key && "
                                 "ln -s ..2026_01_01 %s/vol/..data && ln -s ..data/tls.crt "
                                 "%s/vol/tls.crt && ln -s ..data/tls.key %s/vol/tls.key",
                                 dir, src, src, dir, dir, dir, dir, dir),
                         0);
        free(cert);
        free(key);
        cert = xasprintf("%s/vol/tls.crt", dir);
        key = xasprintf("%s/vol/tls.key", dir);
        assert_int_equal(
                certstore_new(&(struct certstore_opts){ .cert_path = cert, .key_path = key }, &cs,
                              &err),
                0);
        cs = certstore_free(cs);
        log_setup(LOG_FORMAT_TEXT, 0, 2);
        assert_int_equal(test_sh("true"), 0);
        {
                FILE *fp = fopen(logf, "r");
                size_t n;

                assert_non_null(fp);
                text = xcalloc(1, 65536);
                n = fread(text, 1, 65535, fp);
                text[n] = '\0';
                fclose(fp);
        }
        print_message("%s", text);
        assert_int_equal(count_substr(text, "serving certificate loaded"), 2);
        assert_int_equal(count_substr(text, "serving certificate reloaded"), 1);
        assert_non_null(strstr(text, "not_after=20"));
        assert_non_null(strstr(text, "subject="));
        assert_int_equal(count_substr(text, "reload failed"), 1);
        assert_int_equal(count_substr(text, "readable by group or others"), 1);
        assert_int_equal(count_substr(text, "writable by group or others"), 1);
        close(fd);
        free(text);
        free(cert);
        free(key);
        (void)test_sh("rm -rf %s", dir);
}

/* What arrives on fd within timeout_ms, the connection staying open or not. */
static char *read_some(int fd, unsigned timeout_ms)
{
        char *out = NULL;

        (void)read_to_close(fd, timeout_ms, &out);
        return out;
}

static int post_headers(uint16_t port, const char *framing)
{
        int fd = connect_from("127.0.0.1", port);
        char *h = xasprintf("POST /ok HTTP/1.1\r\nHost: x\r\n%s\r\n\r\n", framing);

        send_all(fd, h);
        free(h);
        return fd;
}

static void send_bytes(int fd, size_t n)
{
        char *b = xcalloc(1, n + 1);

        memset(b, 'a', n);
        send_all(fd, b);
        free(b);
}

/* Two 60 000-byte bodies do not fit a 100 000-byte budget: while one is being received the
 * other is answered 503 with Retry-After before its body is sent, a chunked one at its
 * end; once the first completes, its bytes are free again. */
static void test_bodies_in_flight_budget(void **state)
{
        struct fixture *f = fixture_new();
        uint16_t port;
        int a, b, c;
        char *got;

        (void)state;
        f->bodies_in_flight = 100000;
        fixture_start(f, false, 64, 64, LIMIT_HEADER_MS);
        port = http_server_port(f->server);
        a = post_headers(port, "Content-Length: 60000");
        send_bytes(a, 1000); /* a is receiving: its 60 000 bytes are held */
        b = post_headers(port, "Content-Length: 60000");
        got = read_some(b, 1000);
        assert_non_null(strstr(got, "HTTP/1.1 503"));
        assert_non_null(strstr(got, "Retry-After: 1"));
        assert_non_null(strstr(got, "too many request bodies in flight"));
        free(got);
        close(b);
        c = post_headers(port, "Transfer-Encoding: chunked");
        send_all(c, "c350\r\n"); /* one chunk of 50 000 bytes */
        send_bytes(c, 50000);
        send_all(c, "\r\n0\r\n\r\n");
        got = read_some(c, 1000);
        assert_non_null(strstr(got, "HTTP/1.1 503"));
        free(got);
        close(c);
        send_bytes(a, 59000);
        got = read_some(a, 1000);
        assert_non_null(strstr(got, "HTTP/1.1 200"));
        free(got);
        close(a);
        b = post_headers(port, "Content-Length: 60000"); /* the budget is free again */
        send_bytes(b, 60000);
        got = read_some(b, 1000);
        assert_non_null(strstr(got, "HTTP/1.1 200"));
        free(got);
        close(b);
        fixture_free(f);
}

/* Resets the connection at close (SO_LINGER 0): the server's next write to it fails. */
static void close_with_reset(int fd)
{
        struct linger l = { .l_onoff = 1, .l_linger = 0 };

        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)), 0);
        close(fd);
}

/* GET /late on a new connection, reset at once: its answer is written after the reset. */
static void get_late_and_reset(struct fixture *f, bool tls)
{
        static const char req[] = "GET /late HTTP/1.1\r\nHost: x\r\n\r\n";
        uint16_t port = http_server_port(f->server);
        unsigned before = http_server_open_connections(f->server);

        atomic_store(&client_gone, false);
        if (tls) {
                struct tls_conn c;

                assert_int_equal(tls_conn_open(&c, port, NULL, f->ca), 0);
                assert_int_equal(tls_conn_send(&c, req, strlen(req)), 0);
                wait_open(f, before + 1);
                close_with_reset(c.fd); /* no close_notify: the socket goes under the session */
                gnutls_deinit(c.session);
                gnutls_certificate_free_credentials(c.creds);
        } else {
                int fd = connect_from("127.0.0.1", port);

                send_all(fd, req);
                wait_open(f, before + 1);
                close_with_reset(fd);
        }
        atomic_store(&client_gone, true);
        wait_open(f, before); /* the server wrote its answer, failed and dropped it */
}

/* GET /ok answered 200, over TLS when tls. */
static void get_ok_any(struct fixture *f, bool tls)
{
        struct tls_conn c;
        char *got = NULL;

        if (!tls) {
                get_ok(http_server_port(f->server));
                return;
        }
        assert_int_equal(tls_conn_open(&c, http_server_port(f->server), NULL, f->ca), 0);
        assert_int_equal(tls_conn_send(&c, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", 29), 0);
        (void)tls_conn_recv_until(&c, "\r\n\r\nok", 3000, &got);
        assert_non_null(strstr(got, "HTTP/1.1 200"));
        free(got);
        tls_conn_close(&c);
}

/* Clients that reset the connection before their answer is written: the server's writes to
 * it then fail with ECONNRESET and, once that is consumed, EPIPE (strace shows the TLS alert
 * after the failed read meeting EPIPE). Each must stay an error of that connection: SIGPIPE
 * keeps its default action here (the process ends), as in any program embedding the server
 * without ignoring it. The server goes on serving. Plain and TLS. */
static void test_reset_before_answer_is_survived(void **state)
{
        (void)state;
        (void)signal(SIGPIPE, SIG_DFL);
        for (int tls = 0; tls < 2; tls++) {
                struct fixture *f = fixture_new();

                fixture_start(f, tls, 64, 64, 0);
                for (int i = 0; i < 4; i++)
                        get_late_and_reset(f, tls);
                if (tls) {
                        struct tls_conn c;
                        char *got = NULL;

                        assert_int_equal(
                                tls_conn_open(&c, http_server_port(f->server), NULL, f->ca), 0);
                        assert_int_equal(
                                tls_conn_send(&c, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", 29), 0);
                        (void)tls_conn_recv_until(&c, "\r\n\r\nok", 3000, &got);
                        assert_non_null(strstr(got, "HTTP/1.1 200"));
                        free(got);
                        tls_conn_close(&c);
                } else {
                        get_ok(http_server_port(f->server));
                }
                fixture_free(f);
        }
}

/* A connection the server's one worker cannot start for a while (it is busy in a handler):
 * the sweeper reports it after CONN_GUARD_STALL_MS and wakes the worker with a connection of
 * its own (what ends libmicrohttpd 0.9.75's wait when a full epoll batch swallowed the
 * wake-up for an added connection; conn_guard.h). That wake-up is harmless: never counted
 * as a client's connection, closed by the worker at once, plain or TLS; the stalled
 * connection is served once the worker is free, and the server goes on serving. */
static void test_unstarted_connection_wakes_worker(void **state)
{
        static const char late[] = "GET /late HTTP/1.1\r\nHost: x\r\n\r\n";
        static const char ok[] = "GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

        (void)state;
        for (int tls = 0; tls < 2; tls++) {
                struct fixture *f = fixture_new();
                uint16_t port;
                struct tls_conn c = { .fd = -1 };
                char *got = NULL;
                int busy = -1, other;

                fixture_start(f, tls, 64, 64, 0);
                port = http_server_port(f->server);
                atomic_store(&client_gone, false);
                if (tls) {
                        assert_int_equal(tls_conn_open(&c, port, NULL, f->ca), 0);
                        assert_int_equal(tls_conn_send(&c, late, strlen(late)), 0);
                } else {
                        busy = connect_from("127.0.0.1", port);
                        send_all(busy, late);
                }
                wait_open(f, 1);
                (void)poll(NULL, 0, 50); /* its handler runs */
                other = connect_from("127.0.0.2", port);
                if (!tls)
                        send_all(other, ok);
                for (int i = 0; i < 100 && http_server_stalled_connections(f->server) == 0; i++)
                        (void)poll(NULL, 0, 10);
                assert_true(http_server_stalled_connections(f->server) >= 1);
                assert_int_equal(http_server_open_connections(f->server), 1);
                atomic_store(&client_gone, true);
                if (!tls) {
                        assert_true(read_to_close(other, 3000, &got));
                        assert_non_null(strstr(got, "HTTP/1.1 200"));
                        free(got);
                        (void)read_to_close(busy, 200, &got); /* kept alive: its answer */
                        assert_non_null(strstr(got, "late"));
                        free(got);
                        close(busy);
                } else {
                        (void)tls_conn_recv_until(&c, "late", 3000, &got);
                        assert_non_null(strstr(got, "late"));
                        free(got);
                        tls_conn_close(&c);
                }
                close(other);
                wait_open(f, 0);
                get_ok_any(f, tls);
                fixture_free(f);
        }
}

/* Five requests in one TLS record, the last asking to close: all five are answered (the
 * transport reads ahead of GnuTLS, and what it holds must not wait for another wake-up of
 * the edge-triggered loop); then one request sent as a record per 7 bytes. */
static void test_pipelined_requests_all_answered(void **state)
{
        static const char req[] = "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
        static const char last[] = "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                                   "Connection: close\r\n\r\nhi";
        struct fixture *f = fixture_new();
        struct tls_conn c;
        char *all = NULL;
        char *burst;

        (void)state;
        fixture_start(f, true, 0, 0, 0);
        burst = xasprintf("%s%s%s%s%s", req, req, req, req, last);
        assert_int_equal(tls_conn_open(&c, http_server_port(f->server), NULL, f->ca), 0);
        assert_int_equal(tls_conn_send(&c, burst, strlen(burst)), 0);
        (void)tls_conn_recv_all(&c, 5000, &all);
        assert_int_equal(count_substr(all, "HTTP/1.1 200"), 5);
        tls_conn_close(&c);
        free(all);
        all = NULL;
        assert_int_equal(tls_conn_open(&c, http_server_port(f->server), NULL, f->ca), 0);
        for (size_t i = 0; i < strlen(last); i += 7) {
                size_t n = strlen(last) - i < 7 ? strlen(last) - i : 7;

                assert_int_equal(tls_conn_send(&c, last + i, n), 0);
        }
        (void)tls_conn_recv_all(&c, 5000, &all);
        assert_int_equal(count_substr(all, "HTTP/1.1 200"), 1);
        tls_conn_close(&c);
        free(all);
        free(burst);
        fixture_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_slow_headers_closed_at_deadline),
                cmocka_unit_test(test_slow_body_closed_at_request_deadline),
                cmocka_unit_test(test_per_address_limit),
                cmocka_unit_test(test_oldest_evicted_at_cap),
                cmocka_unit_test(test_healthz_under_slow_clients),
                cmocka_unit_test(test_framing),
                cmocka_unit_test(test_query_limits),
                cmocka_unit_test(test_header_sizes),
                cmocka_unit_test(test_certificate_logs),
                cmocka_unit_test(test_bodies_in_flight_budget),
                cmocka_unit_test(test_pipelined_requests_all_answered),
                cmocka_unit_test(test_reset_before_answer_is_survived),
                cmocka_unit_test(test_unstarted_connection_wakes_worker),
        };

        log_setup(LOG_FORMAT_TEXT, 0, 2);
        return cmocka_run_group_tests_name("hostile", tests, NULL, NULL);
}
