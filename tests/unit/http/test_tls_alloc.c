/* tls_alloc: record buffers come back from the thread's cache, other sizes never enter it,
 * the cache is bounded, a thread's cache is freed when it exits (AddressSanitizer's leak
 * check fails the suite otherwise), and GnuTLS really allocates through the hooks. */
#include <fcntl.h>
#include <pthread.h>
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

#include "tls_alloc.h"

#define RECORD 16799 /* what GnuTLS 3.7 asks for a TLS 1.3 record it reads */

static void drain(void)
{
        void *held[TLS_ALLOC_CACHED];
        size_t n = tls_alloc_cached();

        for (size_t i = 0; i < n; i++)
                held[i] = tls_alloc_malloc(RECORD);
        for (size_t i = 0; i < n; i++)
                free(held[i]);
        assert_int_equal(tls_alloc_cached(), 0);
}

static void test_record_buffer_reused(void **state)
{
        void *a, *b;

        (void)state;
        drain();
        a = tls_alloc_malloc(RECORD);
        memset(a, 0xAB, RECORD); /* the whole request is usable */
        tls_alloc_free(a);
        assert_int_equal(tls_alloc_cached(), 1);
        b = tls_alloc_malloc(16895); /* another record size: the same block */
        assert_ptr_equal(a, b);
        assert_int_equal(tls_alloc_cached(), 0);
        memset(b, 0xCD, 16895);
        tls_alloc_free(b);
        drain();
}

static void test_other_sizes_bypass_the_cache(void **state)
{
        size_t sizes[] = { 1, 100, 8192, 16383, 17500, 65536 };

        (void)state;
        drain();
        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                void *p = tls_alloc_malloc(sizes[i]);

                assert_non_null(p);
                memset(p, 1, sizes[i]);
                tls_alloc_free(p);
                assert_int_equal(tls_alloc_cached(), 0);
        }
        tls_alloc_free(NULL);
        assert_int_equal(tls_alloc_cached(), 0);
}

static void test_cache_is_bounded(void **state)
{
        void *p[TLS_ALLOC_CACHED + 3];

        (void)state;
        drain();
        for (size_t i = 0; i < TLS_ALLOC_CACHED + 3; i++)
                p[i] = tls_alloc_malloc(RECORD);
        for (size_t i = 0; i < TLS_ALLOC_CACHED + 3; i++)
                tls_alloc_free(p[i]);
        assert_int_equal(tls_alloc_cached(), TLS_ALLOC_CACHED);
        drain();
}

static void *fill_and_exit(void *arg)
{
        void *p[TLS_ALLOC_CACHED];

        (void)arg;
        for (size_t i = 0; i < TLS_ALLOC_CACHED; i++)
                p[i] = tls_alloc_malloc(RECORD);
        for (size_t i = 0; i < TLS_ALLOC_CACHED; i++)
                tls_alloc_free(p[i]);
        return (void *)(uintptr_t)tls_alloc_cached();
}

static void test_thread_exit_frees_its_cache(void **state)
{
        pthread_t t;
        void *cached = NULL;

        (void)state;
        tls_alloc_install();
        for (int i = 0; i < 8; i++) {
                assert_int_equal(pthread_create(&t, NULL, fill_and_exit, NULL), 0);
                assert_int_equal(pthread_join(t, &cached), 0);
                assert_int_equal((uintptr_t)cached, TLS_ALLOC_CACHED);
        }
}

/* A TLS session's records go through the hooks: after a handshake and a record each way
 * over a socket pair, this thread's cache holds record buffers. */
static void test_gnutls_uses_the_hooks(void **state)
{
        gnutls_anon_server_credentials_t scred;
        gnutls_anon_client_credentials_t ccred;
        gnutls_session_t s, c;
        int fd[2];
        char buf[16];
        int rs = GNUTLS_E_AGAIN, rc = GNUTLS_E_AGAIN;

        (void)state;
        tls_alloc_install();
        assert_ptr_equal(gnutls_malloc, tls_alloc_malloc);
        drain();
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0);
        for (int i = 0; i < 2; i++)
                assert_int_equal(fcntl(fd[i], F_SETFL, fcntl(fd[i], F_GETFL) | O_NONBLOCK), 0);
        assert_int_equal(gnutls_anon_allocate_server_credentials(&scred), 0);
        assert_int_equal(gnutls_anon_allocate_client_credentials(&ccred), 0);
        assert_int_equal(gnutls_init(&s, GNUTLS_SERVER | GNUTLS_NONBLOCK), 0);
        assert_int_equal(gnutls_init(&c, GNUTLS_CLIENT | GNUTLS_NONBLOCK), 0);
        assert_int_equal(gnutls_priority_set_direct(
                                 s, "NORMAL:-VERS-ALL:+VERS-TLS1.2:-KX-ALL:+ANON-ECDH", NULL),
                         0);
        assert_int_equal(gnutls_priority_set_direct(
                                 c, "NORMAL:-VERS-ALL:+VERS-TLS1.2:-KX-ALL:+ANON-ECDH", NULL),
                         0);
        assert_int_equal(gnutls_credentials_set(s, GNUTLS_CRD_ANON, scred), 0);
        assert_int_equal(gnutls_credentials_set(c, GNUTLS_CRD_ANON, ccred), 0);
        gnutls_transport_set_int(s, fd[0]);
        gnutls_transport_set_int(c, fd[1]);
        for (int i = 0; i < 1000 && (rs < 0 || rc < 0); i++) {
                if (rs < 0)
                        rs = gnutls_handshake(s);
                if (rc < 0)
                        rc = gnutls_handshake(c);
        }
        assert_int_equal(rs, 0);
        assert_int_equal(rc, 0);
        assert_int_equal(gnutls_record_send(c, "ping", 4), 4);
        assert_int_equal(gnutls_record_recv(s, buf, sizeof(buf)), 4);
        assert_memory_equal(buf, "ping", 4);
        assert_true(tls_alloc_cached() > 0);
        gnutls_deinit(s);
        gnutls_deinit(c);
        gnutls_anon_free_server_credentials(scred);
        gnutls_anon_free_client_credentials(ccred);
        close(fd[0]);
        close(fd[1]);
        drain();
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_record_buffer_reused),
                cmocka_unit_test(test_other_sizes_bypass_the_cache),
                cmocka_unit_test(test_cache_is_bounded),
                cmocka_unit_test(test_thread_exit_frees_its_cache),
                cmocka_unit_test(test_gnutls_uses_the_hooks),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
