/*
 * maas-sim: a MAAS 2.0 region API emulator for tests, the local demo and benchmarks.
 *
 *   maas-sim --port N (0 = pick) --inventory FILE --api-key CK:TK:TS (repeatable; default
 *            $MAAS_API_KEY) [--tls-cert F --tls-key F] [--deploy-seconds S]
 *            [--release-seconds S] [--boot-seconds S] [--commission-seconds S] [--threads N]
 * [--fail-deploy SYSTEM_ID]...
 *            [--bmc-unknown SYSTEM_ID]... [--error-rate OP=FRACTION]... [--latency-ms N]
 *
 * The first line on stdout is "listening on http[s]://127.0.0.1:N/MAAS". The first API key
 * belongs to user "admin" (superuser); further keys belong to non-admin users "user2",
 * "user3", … (for 403 tests). Listens on 127.0.0.1 only; libmicrohttpd's internal thread pool
 * serves requests; main waits in sigwait() and stops cleanly on SIGTERM/SIGINT.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "buf.h"
#include "err.h"
#include "sim.h"
#include "xalloc.h"

struct opts {
        unsigned port;
        const char *inventory;
        const char *tls_cert, *tls_key;
        unsigned threads;
        cJSON *faults; /* built from the fault flags */
};

struct conn {
        struct buf body;
        bool too_big;
};

static const char *const users[SIM_MAX_KEYS] = { "admin", "user2", "user3", "user4",
                                                 "user5", "user6", "user7", "user8" };

/* --- request handling ------------------------------------------------------------------------ */

static enum MHD_Result add_query(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
        struct sim_params *p = cls;

        (void)kind;
        sim_params_add(p, k, strlen(k), v, v ? strlen(v) : 0);
        return MHD_YES;
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts;

        if (!ms)
                return;
        ts.tv_sec = ms / 1000;
        ts.tv_nsec = (long)(ms % 1000) * 1000000L;
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void latency(struct sim *s)
{
        unsigned ms;
        struct timespec ts;

        pthread_mutex_lock(&s->lock);
        ms = s->faults.latency_ms;
        pthread_mutex_unlock(&s->lock);
        if (!ms)
                return;
        ts.tv_sec = ms / 1000;
        ts.tv_nsec = (long)(ms % 1000) * 1000000L;
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void serve_api(struct sim *s,
                      struct MHD_Connection *c,
                      const char *url,
                      const char *method,
                      struct conn *cc,
                      struct sim_resp *rp)
{
        struct sim_req rq = { .method = method, .path = url };
        const char *ctype = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");

        latency(s);
        MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_query, &rq.query);
        if (sim_params_parse_body(&rq.form, ctype, cc->body.data ? cc->body.data : "",
                                  cc->body.len) < 0)
                sim_reply_text(rp, 400, "Malformed request body.");
        else
                sim_handle(s, &rq, auth, rp);
        sleep_ms(rp->delay_ms); /* a slow answer (compose_delay_ms), after the act */
        sim_params_release(&rq.query);
        sim_params_release(&rq.form);
}

static enum MHD_Result send_resp(struct MHD_Connection *c, struct sim_resp *rp)
{
        size_t len = rp->body ? strlen(rp->body) : 0;
        struct MHD_Response *r =
                MHD_create_response_from_buffer(len, rp->body, MHD_RESPMEM_MUST_FREE);
        enum MHD_Result ret;
        char ra[16];

        if (!r) {
                free(rp->body);
                return MHD_NO;
        }
        rp->body = NULL;
        if (len)
                MHD_add_response_header(r, "Content-Type",
                                        rp->ctype ? rp->ctype : "text/plain; charset=utf-8");
        MHD_add_response_header(r, "X-MAAS-API-Hash", "maas-sim");
        if (rp->retry_after) {
                snprintf(ra, sizeof(ra), "%u", rp->retry_after);
                MHD_add_response_header(r, "Retry-After", ra);
        }
        if (rp->status == 401)
                MHD_add_response_header(r, "WWW-Authenticate", "OAuth realm=\"OAuth\"");
        ret = MHD_queue_response(c, rp->status ? rp->status : 200, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *c,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload,
                                  size_t *upload_size,
                                  void **con_cls)
{
        struct sim *s = cls;
        struct conn *cc = *con_cls;
        struct sim_resp rp = { 0 };

        (void)version;
        if (!cc) {
                cc = xcalloc(1, sizeof(*cc));
                buf_init(&cc->body, SIM_BODY_MAX);
                *con_cls = cc;
                return MHD_YES;
        }
        if (*upload_size) {
                if (!cc->too_big && buf_append(&cc->body, upload, *upload_size) < 0)
                        cc->too_big = true;
                *upload_size = 0;
                return MHD_YES;
        }
        if (cc->too_big)
                sim_reply_text(&rp, 413, "Request body larger than %d bytes.", SIM_BODY_MAX);
        else if (strncmp(url, "/_sim/", 6) == 0)
                sim_admin(s, method, url, cc->body.data ? cc->body.data : "", cc->body.len, &rp);
        else
                serve_api(s, c, url, method, cc, &rp);
        return send_resp(c, &rp);
}

static void on_done(void *cls,
                    struct MHD_Connection *c,
                    void **con_cls,
                    enum MHD_RequestTerminationCode toe)
{
        struct conn *cc = *con_cls;

        (void)cls;
        (void)c;
        (void)toe;
        if (!cc)
                return;
        buf_release(&cc->body);
        free(cc);
        *con_cls = NULL;
}

/* --- start-up ------------------------------------------------------------------------------- */

static int add_key(struct sim *s, const char *spec)
{
        const char *a = strchr(spec, ':');
        const char *b = a ? strchr(a + 1, ':') : NULL;
        struct sim_key *k;

        if (!a || !b || a == spec || b == a + 1 || !b[1] || strchr(b + 1, ':') ||
            s->n_keys == SIM_MAX_KEYS)
                return CM_EINVAL;
        k = &s->keys[s->n_keys];
        k->consumer = xstrndup(spec, (size_t)(a - spec));
        k->token = xstrndup(a + 1, (size_t)(b - a - 1));
        k->secret = xstrdup(b + 1);
        k->user = users[s->n_keys];
        s->n_keys++;
        return 0;
}

static char *read_file(const char *path)
{
        FILE *f = fopen(path, "rb");
        struct buf b;
        char chunk[4096];
        size_t n;

        if (!f)
                return NULL;
        buf_init(&b, 1024 * 1024);
        while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                if (buf_append(&b, chunk, n) < 0)
                        break;
        fclose(f);
        return buf_take(&b, NULL);
}

static bool parse_double(const char *v, double *ret)
{
        char *end = NULL;
        double d = v ? strtod(v, &end) : 0;

        if (!v || end == v || *end || d < 0)
                return false;
        *ret = d;
        return true;
}

static void fault_flag(cJSON *faults, const char *name, const char *v)
{
        cJSON *arr = cJSON_GetObjectItemCaseSensitive(faults, name);

        if (!arr)
                arr = cJSON_AddArrayToObject(faults, name);
        cJSON_AddItemToArray(arr, cJSON_CreateString(v));
}

static int error_rate_flag(cJSON *faults, const char *v)
{
        const char *eq = strchr(v, '=');
        cJSON *rates = cJSON_GetObjectItemCaseSensitive(faults, "error_rate");
        double d;
        char *op;

        if (!eq || eq == v || !parse_double(eq + 1, &d) || d > 1)
                return CM_EINVAL;
        if (!rates)
                rates = cJSON_AddObjectToObject(faults, "error_rate");
        op = xstrndup(v, (size_t)(eq - v));
        cJSON_AddNumberToObject(rates, op, d);
        free(op);
        return 0;
}

enum flag_kind {
        F_PORT,
        F_INVENTORY,
        F_API_KEY,
        F_TLS_CERT,
        F_TLS_KEY,
        F_DEPLOY_S,
        F_RELEASE_S,
        F_BOOT_S,
        F_COMMISSION_S,
        F_THREADS,
        F_LATENCY,
        F_FAIL_DEPLOY,
        F_BMC_UNKNOWN,
        F_ERROR_RATE,
};

static const struct {
        const char *name;
        enum flag_kind kind;
} flag_table[] = {
        { "--port", F_PORT },
        { "--inventory", F_INVENTORY },
        { "--api-key", F_API_KEY },
        { "--tls-cert", F_TLS_CERT },
        { "--tls-key", F_TLS_KEY },
        { "--deploy-seconds", F_DEPLOY_S },
        { "--release-seconds", F_RELEASE_S },
        { "--boot-seconds", F_BOOT_S },
        { "--commission-seconds", F_COMMISSION_S },
        { "--threads", F_THREADS },
        { "--latency-ms", F_LATENCY },
        { "--fail-deploy", F_FAIL_DEPLOY },
        { "--bmc-unknown", F_BMC_UNKNOWN },
        { "--error-rate", F_ERROR_RATE },
};

/* A bounded number flag into *ret (as unsigned). */
static int uint_flag(const char *v, double max, unsigned *ret)
{
        double d;

        if (!parse_double(v, &d) || d > max)
                return CM_EINVAL;
        *ret = (unsigned)d;
        return 0;
}

static int apply_flag(struct sim *s, struct opts *o, enum flag_kind k, const char *v)
{
        unsigned u = 0;

        switch (k) {
        case F_PORT:
                return uint_flag(v, 65535, &o->port);
        case F_INVENTORY:
                o->inventory = v;
                return 0;
        case F_API_KEY:
                return add_key(s, v);
        case F_TLS_CERT:
                o->tls_cert = v;
                return 0;
        case F_TLS_KEY:
                o->tls_key = v;
                return 0;
        case F_DEPLOY_S:
                return parse_double(v, &s->deploy_seconds) ? 0 : CM_EINVAL;
        case F_RELEASE_S:
                return parse_double(v, &s->release_seconds) ? 0 : CM_EINVAL;
        case F_BOOT_S:
                return parse_double(v, &s->boot_seconds) ? 0 : CM_EINVAL;
        case F_COMMISSION_S:
                return parse_double(v, &s->commission_seconds) ? 0 : CM_EINVAL;
        case F_THREADS:
                return uint_flag(v, 64, &o->threads) < 0 || o->threads == 0 ? CM_EINVAL : 0;
        case F_LATENCY:
                if (uint_flag(v, 1e6, &u) < 0)
                        return CM_EINVAL;
                cJSON_AddNumberToObject(o->faults, "latency_ms", u);
                return 0;
        case F_FAIL_DEPLOY:
        case F_BMC_UNKNOWN:
                fault_flag(o->faults, k == F_FAIL_DEPLOY ? "fail_deploy" : "bmc_unknown", v);
                return 0;
        case F_ERROR_RATE:
                return error_rate_flag(o->faults, v);
        }
        return CM_EINVAL;
}

static int parse_flag(struct sim *s, struct opts *o, const char *flag, const char *v)
{
        if (!v)
                return CM_EINVAL;
        for (size_t i = 0; i < ARRAY_SIZE(flag_table); i++)
                if (strcmp(flag, flag_table[i].name) == 0)
                        return apply_flag(s, o, flag_table[i].kind, v);
        return CM_EINVAL;
}

static int parse_args(struct sim *s, struct opts *o, int argc, char **argv)
{
        const char *env = getenv("MAAS_API_KEY");

        for (int i = 1; i < argc; i += 2) {
                if (parse_flag(s, o, argv[i], i + 1 < argc ? argv[i + 1] : NULL) < 0) {
                        fprintf(stderr, "maas-sim: bad flag or value: %s %s\n", argv[i],
                                i + 1 < argc ? argv[i + 1] : "");
                        return CM_EINVAL;
                }
        }
        if (s->n_keys == 0 && env && add_key(s, env) < 0) {
                fprintf(stderr, "maas-sim: MAAS_API_KEY is not CK:TK:TS\n");
                return CM_EINVAL;
        }
        if (s->n_keys == 0) {
                fprintf(stderr, "maas-sim: no API key (--api-key CK:TK:TS or $MAAS_API_KEY)\n");
                return CM_EINVAL;
        }
        if (!o->tls_cert != !o->tls_key) {
                fprintf(stderr, "maas-sim: --tls-cert and --tls-key go together\n");
                return CM_EINVAL;
        }
        return 0;
}

static struct MHD_Daemon *start_daemon(struct sim *s, const struct opts *o, char *cert, char *key)
{
        struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
        struct MHD_OptionItem tls[] = {
                { MHD_OPTION_HTTPS_MEM_CERT, 0, cert },
                { MHD_OPTION_HTTPS_MEM_KEY, 0, key },
                { MHD_OPTION_END, 0, NULL },
        };
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;

        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (cert)
                flags |= MHD_USE_TLS;
        return MHD_start_daemon(
                flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE, o->threads,
                MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned)60, MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000, MHD_OPTION_ARRAY,
                cert ? tls : &tls[2], MHD_OPTION_END);
}

static int setup(struct sim *s, struct opts *o, int argc, char **argv)
{
        char *err = NULL;
        int r;

        r = parse_args(s, o, argc, argv);
        if (r < 0)
                return r;
        r = sim_load_inventory(s, o->inventory, &err);
        if (r == 0)
                r = sim_faults_apply(s, o->faults, &err);
        if (r < 0)
                fprintf(stderr, "maas-sim: %s\n", err ? err : "inventory error");
        free(err);
        return r;
}

static int serve(struct sim *s, const struct opts *o)
{
        char *cert = o->tls_cert ? read_file(o->tls_cert) : NULL;
        char *key = o->tls_key ? read_file(o->tls_key) : NULL;
        struct MHD_Daemon *d = NULL;
        const union MHD_DaemonInfo *info;
        sigset_t set;
        int sig, r = 1;

        if (o->tls_cert && (!cert || !key)) {
                fprintf(stderr, "maas-sim: cannot read the TLS certificate or key\n");
                goto out;
        }
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        d = start_daemon(s, o, cert, key);
        info = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
        if (!info) {
                fprintf(stderr, "maas-sim: cannot listen on 127.0.0.1:%u\n", o->port);
                goto out;
        }
        printf("listening on %s://127.0.0.1:%u/MAAS\n", cert ? "https" : "http",
               (unsigned)info->port);
        fflush(stdout);
        sigwait(&set, &sig);
        r = 0;
out:
        if (d)
                MHD_stop_daemon(d);
        free(cert);
        free(key);
        return r;
}

int main(int argc, char **argv)
{
        struct sim s = { .deploy_seconds = 2,
                         .release_seconds = 1,
                         .boot_seconds = 1,
                         .commission_seconds = 1,
                         .faults = { .error_status = 500 } };
        struct opts o = { .threads = 4, .faults = cJSON_CreateObject() };
        int r;

        signal(SIGPIPE, SIG_IGN);
        pthread_mutex_init(&s.lock, NULL);
        s.log = xcalloc(SIM_LOG_SLOTS, sizeof(*s.log));
        s.rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        r = setup(&s, &o, argc, argv) < 0 ? 2 : serve(&s, &o);
        cJSON_Delete(o.faults);
        sim_release(&s);
        pthread_mutex_destroy(&s.lock);
        return r;
}
