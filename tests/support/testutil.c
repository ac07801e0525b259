/*
 * testutil: process, HTTP and TLS helpers for the integration tests. Test code, but held
 * to the same rules: bounded waits, no leaks, loopback only.
 */
#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <gnutls/x509.h>

#include "buf.h"
#include "json.h"
#include "xalloc.h"

const char *test_env(const char *name)
{
        const char *v = getenv(name);

        if (!v || !*v) {
                fprintf(stderr, "test: environment variable %s is not set (run through ctest)\n",
                        name);
                abort();
        }
        return v;
}

/* The directories test_mkdtemp made, removed with what they hold when the test program
 * that made them exits (not a forked child of it). */
#define TEMP_DIRS_MAX 256

static struct {
        pthread_mutex_t lock;
        pid_t owner;
        size_t n;
        char path[TEMP_DIRS_MAX][32];
} temp_dirs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        (void)remove(path); /* best effort: go on with the rest */
        return 0;
}

static void temp_dirs_remove(void)
{
        if (getpid() != temp_dirs.owner || getenv("CAPMAAS_TEST_KEEP_TMP"))
                return;
        for (size_t i = 0; i < temp_dirs.n; i++)
                (void)nftw(temp_dirs.path[i], remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

void test_mkdtemp(char *out, size_t n)
{
        (void)snprintf(out, n, "/tmp/capmaas-test-XXXXXX");
        if (!mkdtemp(out))
                abort();
        pthread_mutex_lock(&temp_dirs.lock);
        if (!temp_dirs.owner) {
                temp_dirs.owner = getpid();
                (void)atexit(temp_dirs_remove);
        }
        if (temp_dirs.n < TEMP_DIRS_MAX && strlen(out) < sizeof(temp_dirs.path[0]))
                (void)snprintf(temp_dirs.path[temp_dirs.n++], sizeof(temp_dirs.path[0]), "%s", out);
        pthread_mutex_unlock(&temp_dirs.lock);
}

long long test_now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool test_http_wait_for(uint16_t port, const char *path, const char *needle, unsigned timeout_ms)
{
        long long deadline = test_now_ms() + timeout_ms;

        for (;;) {
                long st;
                char *b = test_http_get(port, path, &st);
                bool found = b && strstr(b, needle);

                free(b);
                if (found)
                        return true;
                if (test_now_ms() >= deadline)
                        return false;
                usleep(10 * 1000);
        }
}

int test_pin_to_one_cpu(cpu_set_t *saved)
{
        cpu_set_t one;

        if (sched_getaffinity(0, sizeof(*saved), saved) < 0)
                return -1;
        CPU_ZERO(&one);
        for (size_t c = 0; c < CPU_SETSIZE; c++) {
                if (CPU_ISSET(c, saved)) {
                        CPU_SET(c, &one);
                        break;
                }
        }
        return sched_setaffinity(0, sizeof(one), &one);
}

int test_restore_cpus(const cpu_set_t *saved)
{
        return sched_setaffinity(0, sizeof(*saved), saved);
}

int test_sh(const char *fmt, ...)
{
        va_list ap;
        char *cmd;
        int st;

        va_start(ap, fmt);
        cmd = xvasprintf(fmt, ap);
        va_end(ap);
        st = system(cmd);
        free(cmd);
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

        (void)nanosleep(&ts, NULL);
}

char *capmaas_log(const struct capmaas_proc *p)
{
        struct buf b;
        char chunk[4096];
        ssize_t n;
        int fd = open(p->log_path, O_RDONLY | O_CLOEXEC);

        buf_init(&b, 64u << 20);
        if (fd >= 0) {
                while ((n = read(fd, chunk, sizeof(chunk))) > 0)
                        if (buf_append(&b, chunk, (size_t)n) < 0)
                                break;
                close(fd);
        }
        return buf_take(&b, NULL);
}

static uint16_t json_port(const cJSON *line, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(line, key);

        return cJSON_IsString(v) ? (uint16_t)strtoul(v->valuestring, NULL, 10) : 0;
}

/* Finds the "serving" record in the log and takes the ports from it. */
static bool parse_serving(struct capmaas_proc *p)
{
        char *log = capmaas_log(p);
        bool found = false;

        for (char *s = log, *nl; s && *s && !found; s = nl ? nl + 1 : NULL) {
                cJSON *j;
                const cJSON *msg;

                nl = strchr(s, '\n');
                if (nl)
                        *nl = '\0';
                j = cJSON_Parse(s);
                msg = cJSON_GetObjectItemCaseSensitive(j, "msg");
                if (cJSON_IsString(msg) && strcmp(msg->valuestring, "serving") == 0) {
                        p->webhook_port = json_port(j, "webhook_port");
                        p->health_port = json_port(j, "health_port");
                        p->metrics_port = json_port(j, "metrics_port");
                        p->diagnostics_port = json_port(j, "diagnostics_port");
                        found = true;
                }
                cJSON_Delete(j);
        }
        free(log);
        return found;
}

static void spawn(struct capmaas_proc *p, const char *const *argv, char *const *envp)
{
        int fd;

        p->pid = fork();
        if (p->pid != 0)
                return;
        fd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
                _exit(127);
        (void)dup2(fd, 2);
        (void)dup2(fd, 1);
        close(fd);
        if (envp)
                execve(argv[0], (char *const *)(uintptr_t)argv, envp);
        else
                execv(argv[0], (char *const *)(uintptr_t)argv);
        _exit(127);
}

int capmaas_start(struct capmaas_proc *p,
                  const char *cert_dir,
                  const char *const *extra_args,
                  char *const *envp)
{
        const char *argv[64] = {
                test_env("CAPMAAS_BIN"), "--webhooks-only", "--webhook-port",      "0",
                "--health-addr",         "127.0.0.1:0",     "--metrics-bind-addr", "127.0.0.1:0",
                "--webhook-host",        "127.0.0.1",       "--webhook-cert-dir"
        };
        size_t n = 11;
        char dir[64];

        memset(p, 0, sizeof(*p));
        (void)snprintf(p->cert_dir, sizeof(p->cert_dir), "%s",
                       cert_dir ? cert_dir : test_env("CAPMAAS_TEST_CERTS"));
        argv[n++] = p->cert_dir;
        for (size_t i = 0; extra_args && extra_args[i] && n < 62; i++)
                argv[n++] = extra_args[i];
        argv[n] = NULL;
        test_mkdtemp(dir, sizeof(dir));
        (void)snprintf(p->log_path, sizeof(p->log_path), "%s/capmaas.log", dir);
        spawn(p, argv, envp);
        for (int i = 0; i < 1000; i++) {
                if (parse_serving(p))
                        return 0;
                if (waitpid(p->pid, NULL, WNOHANG) == p->pid)
                        break;
                sleep_ms(10);
        }
        char *log = capmaas_log(p);
        fprintf(stderr, "capmaas did not start; its log:\n%s\n", log);
        free(log);
        (void)capmaas_stop(p, 1000);
        return -1;
}

int capmaas_stop(struct capmaas_proc *p, unsigned timeout_ms)
{
        int st = 0;

        if (p->pid <= 0)
                return -1;
        (void)kill(p->pid, SIGTERM);
        for (unsigned waited = 0; waited <= timeout_ms; waited += 10) {
                pid_t r = waitpid(p->pid, &st, WNOHANG);

                if (r == p->pid) {
                        p->pid = 0;
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                }
                sleep_ms(10);
        }
        (void)kill(p->pid, SIGKILL);
        (void)waitpid(p->pid, &st, 0);
        p->pid = 0;
        return -1;
}

static size_t collect(char *ptr, size_t size, size_t nmemb, void *ud)
{
        struct buf *b = ud;

        return buf_append(b, ptr, size * nmemb) < 0 ? 0 : size * nmemb;
}

static struct curl_slist *request_headers(const struct test_http *req)
{
        struct curl_slist *h = NULL;
        char line[256];

        if (req->content_type) {
                (void)snprintf(line, sizeof(line), "Content-Type: %s", req->content_type);
                h = curl_slist_append(h, line);
        } else if (req->body) {
                h = curl_slist_append(h, "Content-Type:");
        }
        if (req->chunked)
                h = curl_slist_append(h, "Transfer-Encoding: chunked");
        h = curl_slist_append(h, "Expect:");
        if (req->bearer) {
                char auth[512];

                (void)snprintf(auth, sizeof(auth), "Authorization: Bearer %s", req->bearer);
                h = curl_slist_append(h, auth);
        }
        return h;
}

int test_http_do(const struct test_http *req, struct test_http_result *ret)
{
        CURL *c = req->curl ? req->curl : curl_easy_init();
        struct curl_slist *h = request_headers(req);
        struct buf b;
        char *ctype = NULL;

        buf_init(&b, 64u << 20);
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, req->url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        if (req->ca_file)
                curl_easy_setopt(c, CURLOPT_CAINFO, req->ca_file);
        if (req->tls_version)
                curl_easy_setopt(c, CURLOPT_SSLVERSION, req->tls_version);
        if (req->body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
                if (!req->chunked)
                        curl_easy_setopt(
                                c, CURLOPT_POSTFIELDSIZE_LARGE,
                                (curl_off_t)(req->body_len ? req->body_len : strlen(req->body)));
        }
        if (req->method)
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
        memset(ret, 0, sizeof(*ret));
        ret->curl_code = (int)curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ctype);
        if (ctype)
                (void)snprintf(ret->content_type, sizeof(ret->content_type), "%s", ctype);
        ret->body = buf_take(&b, NULL);
        curl_slist_free_all(h);
        if (!req->curl)
                curl_easy_cleanup(c);
        return ret->curl_code == CURLE_OK ? 0 : -1;
}

char *test_http_get(uint16_t port, const char *path, long *ret_status)
{
        char *u = xasprintf("http://127.0.0.1:%u%s", port, path);
        struct test_http_result res;
        char *body;

        (void)test_http_do(&(struct test_http){ .url = u }, &res);
        *ret_status = res.status;
        body = xstrdup(res.body);
        test_http_result_release(&res);
        free(u);
        return body;
}

void test_http_result_release(struct test_http_result *r)
{
        free(r->body);
        memset(r, 0, sizeof(*r));
}

int tcp_connect(uint16_t port)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0)
                return -1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

bool tcp_wait_closed(int fd, unsigned timeout_ms)
{
        char scratch[4096];

        for (unsigned waited = 0; waited <= timeout_ms; waited += 50) {
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                ssize_t n;

                if (poll(&pfd, 1, 50) <= 0)
                        continue;
                n = recv(fd, scratch, sizeof(scratch), 0);
                if (n <= 0)
                        return true;
        }
        return false;
}

int tls_conn_open(struct tls_conn *c, uint16_t port, const char *priority, const char *ca_file)
{
        int r;

        memset(c, 0, sizeof(*c));
        c->fd = tcp_connect(port);
        if (c->fd < 0)
                return GNUTLS_E_PUSH_ERROR;
        gnutls_certificate_allocate_credentials(&c->creds);
        if (ca_file)
                gnutls_certificate_set_x509_trust_file(c->creds, ca_file, GNUTLS_X509_FMT_PEM);
        /* GNUTLS_NO_SIGNAL: GnuTLS's own push otherwise calls send() without MSG_NOSIGNAL, and
         * a write (or the close_notify) to a connection the server has closed raises SIGPIPE
         * in this process, which is the server's too. */
        gnutls_init(&c->session, GNUTLS_CLIENT | GNUTLS_NO_SIGNAL);
        r = gnutls_priority_set_direct(c->session, priority ? priority : "NORMAL", NULL);
        if (r == 0)
                r = gnutls_credentials_set(c->session, GNUTLS_CRD_CERTIFICATE, c->creds);
        if (r == 0) {
                gnutls_transport_set_int(c->session, c->fd);
                gnutls_handshake_set_timeout(c->session, 5000);
                do {
                        r = gnutls_handshake(c->session);
                } while (r < 0 && !gnutls_error_is_fatal(r));
        }
        if (r == 0 && ca_file) {
                unsigned status = 0;

                r = gnutls_certificate_verify_peers2(c->session, &status);
                if (r == 0 && status != 0)
                        r = GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR;
        }
        if (r < 0)
                tls_conn_close(c);
        return r;
}

int tls_conn_send(struct tls_conn *c, const void *data, size_t n)
{
        ssize_t r = gnutls_record_send(c->session, data, n);

        return r == (ssize_t)n ? 0 : -1;
}

size_t tls_conn_recv_until(struct tls_conn *c, const char *needle, unsigned timeout_ms, char **ret)
{
        struct buf b;
        char chunk[4096];

        buf_init(&b, 16u << 20);
        for (unsigned waited = 0; waited <= timeout_ms;) {
                struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
                ssize_t n;

                if (needle && b.data && strstr(b.data, needle))
                        break;
                if (gnutls_record_check_pending(c->session) == 0 && poll(&pfd, 1, 50) <= 0) {
                        waited += 50;
                        continue;
                }
                n = gnutls_record_recv(c->session, chunk, sizeof(chunk));
                if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
                        continue;
                if (n <= 0 || buf_append(&b, chunk, (size_t)n) < 0)
                        break;
        }
        *ret = buf_take(&b, NULL);
        return strlen(*ret);
}

size_t tls_conn_recv_all(struct tls_conn *c, unsigned timeout_ms, char **ret)
{
        return tls_conn_recv_until(c, NULL, timeout_ms, ret);
}

void tls_conn_peer_serial(struct tls_conn *c, char out[64])
{
        unsigned n = 0;
        const gnutls_datum_t *certs = gnutls_certificate_get_peers(c->session, &n);
        gnutls_x509_crt_t crt;
        unsigned char serial[32];
        size_t len = sizeof(serial);

        out[0] = '\0';
        if (!certs || n == 0 || gnutls_x509_crt_init(&crt) < 0)
                return;
        if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) == 0 &&
            gnutls_x509_crt_get_serial(crt, serial, &len) == 0)
                for (size_t i = 0; i < len && i < 31; i++)
                        (void)snprintf(out + 2 * i, 3, "%02x", serial[i]);
        gnutls_x509_crt_deinit(crt);
}

void tls_conn_close(struct tls_conn *c)
{
        if (c->session) {
                (void)gnutls_bye(c->session, GNUTLS_SHUT_WR);
                gnutls_deinit(c->session);
        }
        if (c->creds)
                gnutls_certificate_free_credentials(c->creds);
        if (c->fd > 0)
                close(c->fd);
        memset(c, 0, sizeof(*c));
        c->fd = -1;
}

cJSON *test_fixture_json(const char *fmt, ...)
{
        va_list ap;
        char *path, *file;
        struct buf b;
        char chunk[4096];
        ssize_t n;
        cJSON *root;
        int fd;

        va_start(ap, fmt);
        path = xvasprintf(fmt, ap);
        va_end(ap);
        file = xasprintf("%s/tests/fixtures/%s", test_env("CAPMAAS_SOURCE_DIR"), path);
        free(path);
        fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                fail_msg("cannot open %s", file);
        buf_init(&b, 16u << 20);
        while ((n = read(fd, chunk, sizeof(chunk))) > 0)
                if (buf_append(&b, chunk, (size_t)n) < 0)
                        fail_msg("%s is over 16 MiB", file);
        close(fd);
        root = cJSON_ParseWithLength(b.data ? b.data : "", b.len);
        if (!root)
                fail_msg("%s is not JSON", file);
        buf_release(&b);
        free(file);
        return root;
}

void test_assert_same_json(const cJSON *a, const cJSON *b)
{
        char *ta, *tb;

        if (cJSON_Compare(a, b, true))
                return;
        ta = cJSON_Print(a);
        tb = cJSON_Print(b);
        print_error("expected:\n%s\ngot:\n%s\n", ta, tb);
        cJSON_free(ta);
        cJSON_free(tb);
        fail();
}

cJSON *test_json(const char *fmt, ...)
{
        va_list ap;
        cJSON *o;
        char *s;

        va_start(ap, fmt);
        s = xvasprintf(fmt, ap);
        va_end(ap);
        o = cJSON_Parse(s);
        if (!o)
                fail_msg("bad JSON in test: %s", s);
        free(s);
        return o;
}
