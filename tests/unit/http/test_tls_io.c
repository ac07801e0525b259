/* tls_io: the server side of a real GnuTLS session (anonymous ECDH, no certificate needed)
 * over a non-blocking socket pair, the client side plain GnuTLS: records coalesced into one
 * send, read-ahead serving pipelined records in order, short writes that keep the order,
 * and the flush backstop. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <gnutls/gnutls.h>

#include "tls_io.h"

#define PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.2:-KX-ALL:+ANON-ECDH"

struct pair {
        int fd[2]; /* 0: server, 1: client */
        gnutls_anon_server_credentials_t scred;
        gnutls_anon_client_credentials_t ccred;
        gnutls_session_t server;
        gnutls_session_t client;
        struct tls_io *io;
};

static void nonblocking(int fd)
{
        assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

/* Both handshakes, stepped in turn on one thread. */
static void handshake(struct pair *p)
{
        int rs = GNUTLS_E_AGAIN;
        int rc = GNUTLS_E_AGAIN;

        for (int i = 0; i < 1000 && (rs != 0 || rc != 0); i++) {
                if (rc != 0)
                        rc = gnutls_handshake(p->client);
                if (rs != 0)
                        rs = gnutls_handshake(p->server);
                assert_true(rc == 0 || rc == GNUTLS_E_AGAIN);
                assert_true(rs == 0 || rs == GNUTLS_E_AGAIN);
        }
        assert_int_equal(rs, 0);
        assert_int_equal(rc, 0);
}

static int setup(void **state)
{
        struct pair *p = calloc(1, sizeof(*p));

        assert_non_null(p);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, p->fd), 0);
        nonblocking(p->fd[0]);
        nonblocking(p->fd[1]);
        assert_int_equal(gnutls_anon_allocate_server_credentials(&p->scred), 0);
        assert_int_equal(gnutls_anon_allocate_client_credentials(&p->ccred), 0);
        assert_int_equal(gnutls_init(&p->server, GNUTLS_SERVER | GNUTLS_NONBLOCK), 0);
        assert_int_equal(gnutls_init(&p->client, GNUTLS_CLIENT | GNUTLS_NONBLOCK), 0);
        assert_int_equal(gnutls_priority_set_direct(p->server, PRIORITY, NULL), 0);
        assert_int_equal(gnutls_priority_set_direct(p->client, PRIORITY, NULL), 0);
        assert_int_equal(gnutls_credentials_set(p->server, GNUTLS_CRD_ANON, p->scred), 0);
        assert_int_equal(gnutls_credentials_set(p->client, GNUTLS_CRD_ANON, p->ccred), 0);
        p->io = tls_io_attach(p->server, p->fd[0]);
        gnutls_transport_set_int(p->client, p->fd[1]);
        handshake(p);
        *state = p;
        return 0;
}

static int teardown(void **state)
{
        struct pair *p = *state;

        gnutls_deinit(p->server);
        gnutls_deinit(p->client);
        p->io = tls_io_free(p->io);
        gnutls_anon_free_server_credentials(p->scred);
        gnutls_anon_free_client_credentials(p->ccred);
        close(p->fd[0]);
        close(p->fd[1]);
        free(p);
        return 0;
}

static uint64_t sends(const struct pair *p)
{
        struct tls_io_stats st;

        tls_io_stats(p->io, &st);
        return st.sends;
}

static uint64_t reads(const struct pair *p)
{
        struct tls_io_stats st;

        tls_io_stats(p->io, &st);
        return st.reads;
}

/* Nothing has reached the client's socket. */
static void assert_client_socket_empty(const struct pair *p)
{
        char c;

        assert_int_equal(recv(p->fd[1], &c, 1, MSG_PEEK | MSG_DONTWAIT), -1);
        assert_int_equal(errno, EAGAIN);
}

static void client_expect(struct pair *p, const char *want, size_t len)
{
        char buf[256];

        assert_true(len <= sizeof(buf));
        assert_int_equal(gnutls_record_recv(p->client, buf, sizeof(buf)), (ssize_t)len);
        assert_memory_equal(buf, want, len);
}

/* The headers' record waits for the body's; both go out in one send, headers first. */
static void test_tls_io__coalesced_records_go_out_in_one_send(void **state)
{
        struct pair *p = *state;
        static const char hdr[] = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n";
        uint64_t before = sends(p);

        tls_io_coalesce_next(p->io);
        assert_int_equal(gnutls_record_send(p->server, hdr, strlen(hdr)), (ssize_t)strlen(hdr));
        assert_client_socket_empty(p);
        assert_int_equal(sends(p), before);
        assert_int_equal(gnutls_record_send(p->server, "body", 4), 4);
        assert_int_equal(sends(p), before + 1);
        client_expect(p, hdr, strlen(hdr));
        client_expect(p, "body", 4);
        /* Not armed: each record is its own send. */
        assert_int_equal(gnutls_record_send(p->server, "next", 4), 4);
        assert_int_equal(sends(p), before + 2);
        client_expect(p, "next", 4);
}

/* Three records sent at once are read with one system call and come out in order; the
 * fourth read is the one that says EAGAIN (so edge-triggered polling loses nothing). */
static void test_tls_io__read_ahead_serves_pipelined_records_in_order(void **state)
{
        struct pair *p = *state;
        const char *msgs[] = { "first request", "second", "third one" };
        char buf[64];
        uint64_t before = reads(p);

        for (size_t i = 0; i < 3; i++)
                assert_int_equal(gnutls_record_send(p->client, msgs[i], strlen(msgs[i])),
                                 (ssize_t)strlen(msgs[i]));
        for (size_t i = 0; i < 3; i++) {
                assert_int_equal(gnutls_record_recv(p->server, buf, sizeof(buf)),
                                 (ssize_t)strlen(msgs[i]));
                assert_memory_equal(buf, msgs[i], strlen(msgs[i]));
        }
        assert_int_equal(reads(p), before + 1);
        assert_int_equal(gnutls_record_recv(p->server, buf, sizeof(buf)), GNUTLS_E_AGAIN);
        assert_int_equal(reads(p), before + 2);
}

/* A record larger than the read-ahead still arrives whole. */
static void test_tls_io__record_larger_than_read_ahead_arrives_whole(void **state)
{
        struct pair *p = *state;
        size_t len = 3 * TLS_IO_READ_AHEAD + 17;
        char *out = malloc(len);
        char *in = malloc(len);
        size_t got = 0;

        assert_non_null(out);
        assert_non_null(in);
        for (size_t i = 0; i < len; i++)
                out[i] = (char)('a' + i % 23);
        assert_int_equal(gnutls_record_send(p->client, out, len), (ssize_t)len);
        while (got < len) {
                ssize_t r = gnutls_record_recv(p->server, in + got, len - got);

                assert_true(r > 0);
                got += (size_t)r;
        }
        assert_memory_equal(in, out, len);
        free(out);
        free(in);
}

/* With a tiny socket buffer the body's send is cut short again and again: what was kept and
 * what GnuTLS retries still reach the client whole and in order. */
static void test_tls_io__short_writes_keep_the_order(void **state)
{
        struct pair *p = *state;
        static const char hdr[] = "HTTP/1.1 200 OK\r\n\r\n";
        size_t len = 200000;
        char *body = malloc(len);
        char *in = malloc(len + sizeof(hdr));
        size_t sent = 0;
        size_t got = 0;
        int sz = 2048;

        assert_non_null(body);
        assert_non_null(in);
        for (size_t i = 0; i < len; i++)
                body[i] = (char)('A' + i % 26);
        assert_int_equal(setsockopt(p->fd[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
        assert_int_equal(setsockopt(p->fd[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)), 0);
        tls_io_coalesce_next(p->io);
        assert_int_equal(gnutls_record_send(p->server, hdr, strlen(hdr)), (ssize_t)strlen(hdr));
        for (int turns = 0; got < strlen(hdr) + len; turns++) {
                ssize_t r;

                assert_true(turns < 100000);
                if (sent < len) {
                        r = gnutls_record_send(p->server, body + sent, len - sent);
                        assert_true(r > 0 || r == GNUTLS_E_AGAIN);
                        if (r > 0)
                                sent += (size_t)r;
                }
                r = gnutls_record_recv(p->client, in + got, len + sizeof(hdr) - got);
                assert_true(r > 0 || r == GNUTLS_E_AGAIN);
                if (r > 0)
                        got += (size_t)r;
        }
        assert_memory_equal(in, hdr, strlen(hdr));
        assert_memory_equal(in + strlen(hdr), body, len);
        free(body);
        free(in);
}

/* The backstop: a kept record that no other send followed goes out at tls_io_flush. */
static void test_tls_io__flush_sends_a_kept_record(void **state)
{
        struct pair *p = *state;

        tls_io_coalesce_next(p->io);
        assert_int_equal(gnutls_record_send(p->server, "alone", 5), 5);
        assert_client_socket_empty(p);
        tls_io_flush(p->io);
        client_expect(p, "alone", 5);
}

static int tcp_opt(int fd, int name)
{
        int v = -1;
        socklen_t n = sizeof(v);

        assert_int_equal(getsockopt(fd, IPPROTO_TCP, name, &v, &n), 0);
        return v;
}

/* A TCP connection over loopback: fd[0] the accepted end, fd[1] the client's. */
static void tcp_pair(int fd[2])
{
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t n = sizeof(a);
        int l = socket(AF_INET, SOCK_STREAM, 0);

        assert_true(l >= 0);
        assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(l, 1), 0);
        assert_int_equal(getsockname(l, (struct sockaddr *)&a, &n), 0);
        fd[1] = socket(AF_INET, SOCK_STREAM, 0);
        assert_int_equal(connect(fd[1], (struct sockaddr *)&a, sizeof(a)), 0);
        fd[0] = accept(l, NULL, NULL);
        assert_true(fd[0] >= 0);
        close(l);
}

/* libmicrohttpd's cork and push on an attached socket are answered here: the socket keeps
 * TCP_NODELAY and is never corked; another socket, or the same one once freed, is the
 * kernel's as before. */
static void test_tls_io__attached_socket_is_never_corked(void **state)
{
        static const int on = 1, off = 0;
        gnutls_session_t session;
        struct tls_io *io;
        int fd[2];

        (void)state;
        tcp_pair(fd);
        assert_int_equal(gnutls_init(&session, GNUTLS_SERVER), 0);
        io = tls_io_attach(session, fd[0]);
        assert_int_equal(tcp_opt(fd[0], TCP_NODELAY), 1);
        assert_int_equal(setsockopt(fd[0], IPPROTO_TCP, TCP_CORK, &on, sizeof(on)), 0);
        assert_int_equal(tcp_opt(fd[0], TCP_CORK), 0);
        assert_int_equal(setsockopt(fd[0], IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)), 0);
        assert_int_equal(setsockopt(fd[0], IPPROTO_TCP, TCP_NODELAY, &off, sizeof(off)), 0);
        assert_int_equal(tcp_opt(fd[0], TCP_NODELAY), 1); /* never held back */
        assert_int_equal(setsockopt(fd[1], IPPROTO_TCP, TCP_CORK, &on, sizeof(on)), 0);
        assert_int_equal(tcp_opt(fd[1], TCP_CORK), 1);
        io = tls_io_free(io);
        assert_int_equal(setsockopt(fd[0], IPPROTO_TCP, TCP_CORK, &on, sizeof(on)), 0);
        assert_int_equal(tcp_opt(fd[0], TCP_CORK), 1);
        errno = 0;
        assert_int_equal(setsockopt(-1, IPPROTO_TCP, TCP_CORK, &on, sizeof(on)), -1);
        assert_int_equal(errno, EBADF);
        gnutls_deinit(session);
        close(fd[0]);
        close(fd[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_tls_io__coalesced_records_go_out_in_one_send,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_tls_io__read_ahead_serves_pipelined_records_in_order, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_tls_io__record_larger_than_read_ahead_arrives_whole, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tls_io__short_writes_keep_the_order, setup,
                                                teardown),
                cmocka_unit_test(test_tls_io__attached_socket_is_never_corked),
                cmocka_unit_test_setup_teardown(test_tls_io__flush_sends_a_kept_record, setup,
                                                teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
