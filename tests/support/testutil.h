#pragma once
/*
 * testutil: helpers for integration tests: start the capmaas binary and learn its ports,
 * make HTTP(S) requests with libcurl, and drive raw TLS connections with GnuTLS. Every wait
 * is bounded; every process a test starts is stopped by the test (or killed at exit).
 * Single-threaded use unless a function says otherwise.
 */

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <gnutls/gnutls.h>

#include "compiler.h"

struct capmaas_proc {
        pid_t pid;
        char log_path[256]; /* stderr of the process */
        char cert_dir[256]; /* the --webhook-cert-dir given, or the test certs */
        uint16_t webhook_port;
        uint16_t health_port;
        uint16_t metrics_port;
        uint16_t diagnostics_port; /* 0 when the diagnostics server is off */
};

/* Environment: CAPMAAS_BIN, CAPMAAS_TEST_CERTS, CAPMAAS_SOURCE_DIR. Aborts the test when
 * unset. */
const char *test_env(const char *name);
/* A new directory /tmp/capmaas-test-XXXXXX into out (n >= 25), removed with its contents
 * when the test program exits (kept when CAPMAAS_TEST_KEEP_TMP is set, to read the logs
 * of a failed run). Any thread. */
void test_mkdtemp(char *out, size_t n);
/* Runs a shell command; returns its exit status. */
int test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* CLOCK_MONOTONIC in milliseconds (for deadlines). */
long long test_now_ms(void);
/* Polls GET http://127.0.0.1:port<path> every 10 ms until the body contains needle; true if
 * it did within timeout_ms. */
bool test_http_wait_for(uint16_t port, const char *path, const char *needle, unsigned timeout_ms);
/* Narrows the calling thread's affinity to its first allowed CPU (as taskset -c would),
 * saving the previous mask in *saved for test_restore_cpus. Threads and processes started
 * afterwards inherit it. Returns 0 or -1. */
int test_pin_to_one_cpu(cpu_set_t *saved);
/* Puts back the mask test_pin_to_one_cpu saved. Returns 0 or -1. */
int test_restore_cpus(const cpu_set_t *saved);

/* Starts capmaas with --webhooks-only, every port 0, the given cert dir (NULL = the test
 * certs) and extra args (NULL-terminated; envp NULL = inherit). Waits up to 10 s for the
 * "serving" log line. Returns 0 or -1 (the log is printed on failure). */
int capmaas_start(struct capmaas_proc *p,
                  const char *cert_dir,
                  const char *const *extra_args,
                  char *const *envp);
/* SIGTERM, then waits up to timeout_ms; SIGKILL after that. Returns the exit status, or -1
 * when it had to be killed. */
int capmaas_stop(struct capmaas_proc *p, unsigned timeout_ms);
/* Reads the whole stderr log (malloc'd). */
char *capmaas_log(const struct capmaas_proc *p);

struct test_http {
        const char *method; /* NULL = GET, or POST when body is set */
        const char *url;
        const char *content_type; /* NULL = none */
        const char *body;         /* NULL = none */
        size_t body_len;          /* 0 = strlen(body) */
        const char *ca_file;      /* NULL = plain HTTP */
        long tls_version;         /* CURL_SSLVERSION_* or 0 */
        bool chunked;             /* send the body with Transfer-Encoding: chunked */
        void *curl;               /* a CURL * to reuse (keep-alive), or NULL */
        const char *bearer;       /* Authorization: Bearer <token>, or NULL */
};

struct test_http_result {
        long status; /* 0 when the transfer failed */
        int curl_code;
        char *body; /* malloc'd, NUL-terminated */
        char content_type[128];
};

int test_http_do(const struct test_http *req, struct test_http_result *ret);
/* GET http://127.0.0.1:port<path>; returns the body (malloc'd) and the status (0 when the
 * transfer failed). */
char *test_http_get(uint16_t port, const char *path, long *ret_status);
void test_http_result_release(struct test_http_result *r);

/* A raw TLS client connection to 127.0.0.1:port. */
struct tls_conn {
        int fd;
        gnutls_session_t session;
        gnutls_certificate_credentials_t creds;
};

/* Connects and handshakes with the priority string (NULL = "NORMAL"), trusting ca_file.
 * Returns 0 or a negative GnuTLS error (the connection is then closed). */
int tls_conn_open(struct tls_conn *c, uint16_t port, const char *priority, const char *ca_file);
int tls_conn_send(struct tls_conn *c, const void *data, size_t n);
/* Reads until the peer closes or timeout_ms passes; returns bytes read (malloc'd in *ret). */
size_t tls_conn_recv_all(struct tls_conn *c, unsigned timeout_ms, char **ret);
/* ... or until what it read contains needle (a response on a kept-alive connection). */
size_t tls_conn_recv_until(struct tls_conn *c, const char *needle, unsigned timeout_ms, char **ret);
/* The serial number of the peer's leaf certificate as hex (out must hold 64 bytes). */
void tls_conn_peer_serial(struct tls_conn *c, char out[64]);
void tls_conn_close(struct tls_conn *c);

/* Connects a plain TCP socket to 127.0.0.1:port; returns the fd or -1. */
int tcp_connect(uint16_t port);
/* Waits up to timeout_ms for the peer to close fd (read returns 0 or an error); true if it
 * did. Data received meanwhile is discarded. */
bool tcp_wait_closed(int fd, unsigned timeout_ms);

struct cJSON;
/* The JSON text made from fmt (printf-style), parsed; fails the running test when it does
 * not parse. The caller owns the tree (cJSON_Delete). */
struct cJSON *test_json(const char *fmt, ...) PRINTF_LIKE(1, 2);
/* The JSON file tests/fixtures/<path> of the source tree (CAPMAAS_SOURCE_DIR), the path
 * made from fmt (printf-style), parsed; fails the running test when it is missing or does
 * not parse. The caller owns the tree. */
struct cJSON *test_fixture_json(const char *fmt, ...) PRINTF_LIKE(1, 2);
/* Fails the running test, printing both, unless a and b are the same JSON. */
void test_assert_same_json(const struct cJSON *a, const struct cJSON *b);
