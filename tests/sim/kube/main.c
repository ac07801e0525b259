/*
 * kube-sim: a Kubernetes API server emulator for tests.
 *
 *   kube-sim --port N (0 = pick) --dir DIR [--service-override NS/NAME=HOST:PORT]...
 *            [--history N] [--bookmark-interval SECS] [-v]
 *
 * Makes a CA and a serving certificate in DIR, listens with TLS on 127.0.0.1, writes
 * DIR/kubeconfig (CA data + bearer token) and only then prints "listening on
 * https://127.0.0.1:N". SIGTERM/SIGINT stop it cleanly.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <microhttpd.h>

#include "base64.h"
#include "err.h"
#include "ks.h"
#include "log.h"
#include "xalloc.h"

struct ks ks = {
        .mu = PTHREAD_MUTEX_INITIALIZER,
        .cond = PTHREAD_COND_INITIALIZER,
};

struct opts {
        unsigned port;
        const char *dir;
        size_t history;
        int verbose;
};

/* ---- certificates ---- */

static int run(const char *const argv[])
{
        pid_t pid = fork();
        int st = 0;

        if (pid < 0)
                return CM_EIO;
        if (pid == 0) {
                int fd = open("/dev/null", O_WRONLY);

                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                execvp(argv[0], (char *const *)(uintptr_t)argv);
                _exit(127);
        }
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return CM_EIO;
        return 0;
}

/* openssl req arguments for a new P-256 key, unencrypted, written to the path that follows */
#define NEW_EC_KEY "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout"

static int make_certs(const char *dir)
{
        char *cakey = xasprintf("%s/ca.key", dir), *cacrt = xasprintf("%s/ca.crt", dir);
        char *key = xasprintf("%s/tls.key", dir), *csr = xasprintf("%s/tls.csr", dir);
        char *crt = xasprintf("%s/tls.crt", dir), *ext = xasprintf("%s/tls.ext", dir);
        const char *const ca[] = { "openssl",
                                   "req",
                                   "-x509",
                                   NEW_EC_KEY,
                                   cakey,
                                   "-out",
                                   cacrt,
                                   "-days",
                                   "30",
                                   "-subj",
                                   "/CN=kube-sim-ca",
                                   "-addext",
                                   "basicConstraints=critical,CA:TRUE",
                                   "-addext",
                                   "keyUsage=critical,keyCertSign,cRLSign",
                                   NULL };
        const char *const req[] = { "openssl", "req",   NEW_EC_KEY,           key, "-out",
                                    csr,       "-subj", "/CN=kube-apiserver", NULL };
#undef NEW_EC_KEY
        const char *const sign[] = { "openssl", "x509", "-req",     "-in", csr,
                                     "-CA",     cacrt,  "-CAkey",   cakey, "-CAcreateserial",
                                     "-days",   "30",   "-extfile", ext,   "-out",
                                     crt,       NULL };
        FILE *f = fopen(ext, "w");
        int err = CM_EIO;

        if (!f)
                goto out;
        fputs("basicConstraints=critical,CA:FALSE\n"
              "keyUsage=critical,digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=serverAuth\n"
              "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n",
              f);
        if (fclose(f) != 0)
                goto out;
        err = run(ca);
        if (!err)
                err = run(req);
        if (!err)
                err = run(sign);
out:
        free(cakey);
        free(cacrt);
        free(key);
        free(csr);
        free(crt);
        free(ext);
        return err;
}

static char *read_file(const char *dir, const char *name)
{
        char *path = xasprintf("%s/%s", dir, name);
        FILE *f = fopen(path, "rb");
        struct buf b;
        char chunk[4096];
        size_t n;

        free(path);
        if (!f)
                return NULL;
        buf_init(&b, 1u << 20);
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                if (buf_append(&b, chunk, n) < 0)
                        break;
        fclose(f);
        return buf_take(&b, NULL);
}

static int write_kubeconfig(const char *dir, unsigned port)
{
        char *ca = read_file(dir, "ca.crt");
        char *b64 = ca ? base64_encode((const unsigned char *)ca, strlen(ca)) : NULL;
        char *tmp = xasprintf("%s/.kubeconfig.new", dir), *dst = xasprintf("%s/kubeconfig", dir);
        FILE *f = fopen(tmp, "w");
        int err = CM_EIO;

        if (!f || !b64)
                goto out;
        fprintf(f,
                "apiVersion: v1\nkind: Config\nclusters:\n- name: kube-sim\n  cluster:\n"
                "    server: https://127.0.0.1:%u\n    certificate-authority-data: %s\n"
                "contexts:\n- name: kube-sim\n  context:\n    cluster: kube-sim\n"
                "    user: kube-sim-admin\n    namespace: default\n"
                "current-context: kube-sim\nusers:\n- name: kube-sim-admin\n  user:\n"
                "    token: %s\n",
                port, b64, ks.token);
        if (fclose(f) == 0 && rename(tmp, dst) == 0)
                err = 0;
        f = NULL;
out:
        if (f)
                fclose(f);
        free(ca);
        free(b64);
        free(tmp);
        free(dst);
        return err;
}

/* ---- arguments ---- */

static void usage(void)
{
        fputs("usage: kube-sim --port N --dir DIR [--service-override NS/NAME=HOST:PORT]... "
              "[--history N] [--bookmark-interval SECS] [-v]\n",
              stderr);
        exit(2);
}

static void add_override(const char *arg)
{
        const char *eq = strchr(arg, '=');

        if (!eq || !strchr(arg, '/'))
                usage();
        ks.overrides = xrealloc(ks.overrides, (ks.n_overrides + 1) * sizeof(*ks.overrides));
        ks.overrides[ks.n_overrides].service = xstrndup(arg, (size_t)(eq - arg));
        ks.overrides[ks.n_overrides].target = xstrdup(eq + 1);
        ks.n_overrides++;
}

static unsigned long num_arg(const char *s)
{
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || end == s || *end)
                usage();
        return v;
}

/* Seconds, fractions allowed ("0.2"), as milliseconds (at least 1). */
static uint64_t seconds_arg(const char *s)
{
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || *end || !(v > 0) || v > 86400)
                usage();
        return v * 1000 < 1 ? 1 : (uint64_t)(v * 1000);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
        int i;

        for (i = 1; i < argc; i++) {
                const char *a = argv[i];
                const char *v = i + 1 < argc ? argv[i + 1] : NULL;

                if (!strcmp(a, "-v")) {
                        o->verbose++;
                        continue;
                }
                if (!v)
                        usage();
                i++;
                if (!strcmp(a, "--port"))
                        o->port = (unsigned)num_arg(v);
                else if (!strcmp(a, "--dir"))
                        o->dir = v;
                else if (!strcmp(a, "--service-override"))
                        add_override(v);
                else if (!strcmp(a, "--history"))
                        o->history = num_arg(v);
                else if (!strcmp(a, "--bookmark-interval"))
                        ks.bookmark_ms = seconds_arg(v);
                else
                        usage();
        }
        if (!o->dir || o->port > 65535)
                usage();
}

/* ---- HTTP glue ---- */

struct conn_ctx {
        struct buf body;
        bool too_big;
};

static void add_headers(struct MHD_Response *mr, const struct kresp *resp)
{
        size_t i;

        MHD_add_response_header(mr, "Content-Type",
                                resp->content_type ? resp->content_type : "application/json");
        MHD_add_response_header(mr, "Cache-Control", "no-cache, private");
        for (i = 0; i < resp->n_warnings; i++) {
                char *w = xasprintf("299 - \"%s\"", resp->warnings[i]);

                MHD_add_response_header(mr, "Warning", w);
                free(w);
        }
}

static enum MHD_Result send_resp(struct MHD_Connection *conn, struct kresp *resp)
{
        struct MHD_Response *mr;
        enum MHD_Result ret;
        const char *body = resp->body ? resp->body : "";
        size_t i;

        if (resp->stream)
                mr = watch_response(resp->stream);
        else
                mr = MHD_create_response_from_buffer(strlen(body), (void *)(uintptr_t)body,
                                                     MHD_RESPMEM_MUST_COPY);
        if (!mr)
                return MHD_NO;
        add_headers(mr, resp);
        ret = MHD_queue_response(conn, resp->status ? resp->status : 200, mr);
        MHD_destroy_response(mr);
        free(resp->body);
        for (i = 0; i < resp->n_warnings; i++)
                free(resp->warnings[i]);
        return ret;
}

static bool public_path(const char *p)
{
        return !strcmp(p, "/version") || !strcmp(p, "/healthz") || !strcmp(p, "/livez") ||
               !strcmp(p, "/readyz");
}

static bool authorized(struct MHD_Connection *conn)
{
        const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");

        return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, ks.token);
}

static void process(struct MHD_Connection *conn,
                    const char *url,
                    const char *method,
                    struct conn_ctx *ctx,
                    struct kresp *resp)
{
        struct kreq r = {
                .conn = conn,
                .method = method,
                .path = url,
                .accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept"),
                .content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type"),
                .user_agent = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "User-Agent"),
                .body = ctx->body.data ? ctx->body.data : "",
                .body_len = ctx->body.len,
        };

        if (ctx->too_big)
                kresp_status(resp, 413, "RequestEntityTooLarge", NULL,
                             "Request entity too large: limit is %u", KS_MAX_BODY);
        else if (!public_path(url) && !authorized(conn))
                kresp_status(resp, 401, "Unauthorized", NULL, "Unauthorized");
        else if (!simctl_fault(&r, resp))
                handle_request(&r, resp);
        simctl_log(&r, resp->status);
        log_debug("kube-sim", "request", "method=%s path=%s status=%u", method, url, resp->status);
}

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *conn,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_size,
                                  void **con_cls)
{
        struct conn_ctx *ctx = *con_cls;
        struct kresp resp = { 0 };

        (void)cls;
        (void)version;
        if (!ctx) {
                ctx = xcalloc(1, sizeof(*ctx));
                buf_init(&ctx->body, KS_MAX_BODY);
                *con_cls = ctx;
                return MHD_YES;
        }
        if (*upload_size) {
                if (buf_append(&ctx->body, upload_data, *upload_size) < 0)
                        ctx->too_big = true;
                *upload_size = 0;
                return MHD_YES;
        }
        process(conn, url, method, ctx, &resp);
        return send_resp(conn, &resp);
}

static void on_done(void *cls,
                    struct MHD_Connection *conn,
                    void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
        struct conn_ctx *ctx = *con_cls;

        (void)cls;
        (void)conn;
        (void)toe;
        if (!ctx)
                return;
        buf_release(&ctx->body);
        free(ctx);
        *con_cls = NULL;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Query unescaping as Go's url.ParseQuery does it: %XX and '+' for a space. */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
        char *r = s, *w = s;

        (void)cls;
        (void)conn;
        while (*r) {
                if (*r == '+') {
                        *w++ = ' ';
                        r++;
                } else if (*r == '%' && hexval(r[1]) >= 0 && hexval(r[2]) >= 0) {
                        *w++ = (char)(hexval(r[1]) * 16 + hexval(r[2]));
                        r += 3;
                } else {
                        *w++ = *r++;
                }
        }
        *w = 0;
        return (size_t)(w - s);
}

/* The listening socket on 127.0.0.1:port (0 = any), bound before libmicrohttpd starts its
 * threads, so the port it got is known first: ks.host and ks.dir are then set once, before
 * any thread that reads them exists (setting them after the start raced with the
 * connection threads, which TSan reported in admission's ca_file). -1 on failure. */
static int listen_socket(unsigned port, unsigned *ret_port)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        socklen_t len = sizeof(sa);
        int one = 1;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd < 0)
                return -1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0 ||
            getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
                fprintf(stderr, "kube-sim: cannot listen on 127.0.0.1:%u: %s\n", port,
                        strerrordesc_np(errno));
                close(fd);
                return -1;
        }
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

/* Serves on fd (libmicrohttpd owns it from here: it closes it when it stops). */
static struct MHD_Daemon *start_daemon(int fd, const char *cert, const char *key)
{
        return MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                                        MHD_USE_POLL | MHD_USE_TLS,
                                0, NULL, NULL, on_request, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                                MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_HTTPS_MEM_KEY, key,
                                MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
                                MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                                MHD_OPTION_CONNECTION_LIMIT, 1000u, MHD_OPTION_CONNECTION_TIMEOUT,
                                0u, MHD_OPTION_END);
}

static char *make_token(void)
{
        return xasprintf("%016llx%016llx", (unsigned long long)ks_random(),
                         (unsigned long long)ks_random());
}

static void state_free(void)
{
        size_t i;

        admission_free();
        registry_free();
        store_free();
        authn_free();
        for (i = 0; i < ks.n_overrides; i++) {
                free(ks.overrides[i].service);
                free(ks.overrides[i].target);
        }
        free(ks.overrides);
        cJSON_Delete(ks.reqlog);
        cJSON_Delete(ks.counts);
        cJSON_Delete(ks.access);
        free(ks.token);
        free(ks.host);
}

static int serve(const struct opts *o)
{
        char *cert = read_file(o->dir, "tls.crt"), *key = read_file(o->dir, "tls.key");
        struct MHD_Daemon *d = NULL;
        unsigned port = 0;
        sigset_t set;
        int sig = 0, err = CM_EIO, fd = -1;

        if (!cert || !key)
                goto out;
        fd = listen_socket(o->port, &port);
        if (fd < 0)
                goto out;
        ks.host = xasprintf("127.0.0.1:%u", port);
        ks.dir = o->dir;
        d = start_daemon(fd, cert, key);
        if (!d) {
                close(fd);
                goto out;
        }
        if (write_kubeconfig(o->dir, port) < 0)
                goto out;
        printf("listening on https://127.0.0.1:%u\n", port);
        fflush(stdout);
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigwait(&set, &sig);
        log_info("kube-sim", "stopping", "signal=%d", sig);
        err = 0;
out:
        pthread_mutex_lock(&ks.mu);
        ks.stopping = true;
        store_wake_all();
        pthread_mutex_unlock(&ks.mu);
        if (d)
                MHD_stop_daemon(d);
        free(cert);
        free(key);
        return err;
}

int main(int argc, char **argv)
{
        struct opts o = { .history = 2000 };
        sigset_t set;
        int err;

        ks.bookmark_ms = 60000;
        parse_args(argc, argv, &o);
        log_setup(LOG_FORMAT_TEXT, o.verbose, 2);
        xalloc_install_cjson_hooks();
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        if (mkdir(o.dir, 0700) < 0 && errno != EEXIST) {
                fprintf(stderr, "kube-sim: cannot create %s\n", o.dir);
                return 1;
        }
        if (make_certs(o.dir) < 0) {
                fprintf(stderr, "kube-sim: certificate generation (openssl) failed\n");
                return 1;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        ks.token = make_token();
        ks.reqlog = cJSON_CreateArray();
        store_init(o.history);
        registry_init();
        handlers_seed();
        err = serve(&o);
        state_free();
        curl_global_cleanup();
        if (err)
                fprintf(stderr, "kube-sim: cannot serve: %s\n", cm_strerror(err));
        return err ? 1 : 0;
}
