/*
 * main: process wiring. Parses the configuration, blocks the termination signals before any
 * thread exists (every thread inherits the mask; main waits for them with sigwait), starts
 * the listeners — webhooks over HTTPS, health and metrics over plain HTTP — and on SIGTERM
 * or SIGINT stops accepting, lets requests in flight finish within
 * --graceful-shutdown-timeout, and tears everything down in reverse order.
 *
 * This is the only file that sees both the webhooks and the reconcile libraries.
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "certstore.h"
#include "config.h"
#include "cpus.h"
#include "curl_lib.h"
#include "err.h"
#include "health.h"
#include "http_server.h"
#include "kube_client.h"
#include "leader.h"
#include "log.h"
#include "maas_client.h"
#include "maas_inventory.h"
#include "metrics.h"
#include "parse.h"
#include "process_metrics.h"
#include "provider.h"
#include "router.h"
#include "webhook_metrics.h"
#include "webhooks.h"
#include "xalloc.h"

#define METRICS_BODY_MAX         (16u << 20)
#define WEBHOOK_AUTO_THREADS_MAX 4u

/* Series of one webhook path, looked up once at start so a request updates its metrics
 * without taking the registry lock. */
struct path_series {
        const char *path; /* the route's own pointer, compared by address */
        struct metric_series *in_flight;
        struct metric_series *latency;
        struct metric_series *ok; /* requests_total{code="200"} */
};

struct app {
        const struct config *cfg;        /* borrowed */
        struct metrics *metrics;         /* owned */
        struct webhook_metrics wm;       /* families owned by metrics */
        struct certstore *certs;         /* owned */
        struct router *webhook_routes;   /* owned */
        struct router *health_routes;    /* owned */
        struct router *metrics_routes;   /* owned */
        struct health *health;           /* owned */
        struct http_server *webhook;     /* owned */
        struct http_server *health_srv;  /* owned */
        struct http_server *metrics_srv; /* owned */
        struct http_observer observer;
        struct maas_inventory *inventory; /* owned; NULL when the MAAS checks are off */
        struct controllers *ctl;          /* owned; NULL with --webhooks-only */
        struct webhooks *hooks;           /* owned */
        struct path_series paths[16];
        size_t n_paths;
};

static void cache_path_series(struct app *app)
{
        for (size_t i = 0; i < webhook_endpoints_n && i < ARRAY_SIZE(app->paths); i++) {
                const char *path = webhook_endpoints[i].path;

                app->paths[i] = (struct path_series){
                        .path = path,
                        .in_flight = metric_series(app->wm.in_flight, path, NULL),
                        .latency = metric_series(app->wm.latency, path, NULL),
                        .ok = metric_series(app->wm.requests, path, "200", NULL),
                };
                app->n_paths = i + 1;
        }
}

static const struct path_series *find_path_series(const struct app *app, const char *path)
{
        for (size_t i = 0; i < app->n_paths; i++)
                if (app->paths[i].path == path)
                        return &app->paths[i];
        return NULL;
}

static void observe_begin(void *ud, const char *path)
{
        struct app *app = ud;
        const struct path_series *ps = find_path_series(app, path);

        metric_gauge_inc(ps ? ps->in_flight : metric_series(app->wm.in_flight, path, NULL));
}

static void observe_end(void *ud, const char *path, unsigned status, double seconds)
{
        struct app *app = ud;
        const struct path_series *ps = find_path_series(app, path);
        char code[8];

        if (ps && status == 200) {
                metric_counter_inc(ps->ok);
        } else {
                (void)snprintf(code, sizeof(code), "%u", status);
                metric_counter_inc(metric_series(app->wm.requests, path, code, NULL));
        }
        metric_gauge_dec(ps ? ps->in_flight : metric_series(app->wm.in_flight, path, NULL));
        metric_histogram_observe(ps ? ps->latency : metric_series(app->wm.latency, path, NULL),
                                 seconds);
}

static void collect_cert_stats(struct metrics *m, void *ud)
{
        struct app *app = ud;
        struct certstore_stats st;

        (void)m;
        certstore_stats(app->certs, &st);
        metric_counter_set(app->wm.cert_reads, (double)st.reads);
        metric_counter_set(app->wm.cert_read_errors, (double)st.read_errors);
        metric_gauge_set(app->wm.cert_expiry, st.loaded ? (double)st.not_after : 0);
}

static bool check_webhook_ready(void *ud, char **ret_reason)
{
        struct app *app = ud;
        struct certstore_stats st;

        if (!app->webhook) {
                *ret_reason = xstrdup("webhook server not started");
                return false;
        }
        certstore_stats(app->certs, &st);
        if (!st.loaded || (st.not_after && st.not_after <= time(NULL))) {
                *ret_reason = xstrdup("serving certificate missing or expired");
                return false;
        }
        return true;
}

static void serve_metrics(void *ud, const struct http_request *req, struct http_response *resp)
{
        struct app *app = ud;
        struct buf out;

        (void)req;
        buf_init(&out, METRICS_BODY_MAX);
        if (metrics_render(app->metrics, &out) < 0) {
                buf_release(&out);
                http_response_error(resp, 500, "metrics too large");
                return;
        }
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        resp->body = buf_take(&out, &resp->body_len);
}

static int start_metrics(struct app *app, char **reterr)
{
        int r;

        r = metrics_new(&app->metrics);
        if (r == 0)
                r = process_metrics_register(app->metrics);
        if (r == 0)
                r = webhook_metrics_register(app->metrics, &app->wm);
        if (r == 0)
                r = metrics_add_collector(app->metrics, collect_cert_stats, app, NULL);
        if (r < 0)
                *reterr = xasprintf("metrics registry: %s", cm_strerror(r));
        return r;
}

static int load_certs(struct app *app, char **reterr)
{
        const struct config *cfg = app->cfg;
        char *cert = xasprintf("%s/%s", cfg->webhook_cert_dir, cfg->webhook_cert_name);
        char *key = xasprintf("%s/%s", cfg->webhook_cert_dir, cfg->webhook_key_name);
        struct certstore_opts opts = {
                .cert_path = cert,
                .key_path = key,
                .retire_ms = 2000u * 1000u * (uint64_t)cfg->webhook_read_timeout_s + 60000u,
        };
        int r;

        r = certstore_new(&opts, &app->certs, reterr);
        if (r == 0)
                r = certstore_start(app->certs);
        free(cert);
        free(key);
        return r;
}

/* --webhook-threads, or with 0 one event loop per CPU capmaas may use, at most
 * WEBHOOK_AUTO_THREADS_MAX: more loops than CPUs only make connections wait their turn a
 * scheduler tick at a time (docs/performance.md). */
static unsigned webhook_threads(const struct config *cfg)
{
        unsigned n;

        if (cfg->webhook_threads != 0)
                return cfg->webhook_threads;
        n = cpus_usable();
        return n < WEBHOOK_AUTO_THREADS_MAX ? n : WEBHOOK_AUTO_THREADS_MAX;
}

static int start_webhook_server(struct app *app, char **reterr)
{
        const struct config *cfg = app->cfg;
        struct http_server_opts opts = {
                .name = "webhook",
                .host = cfg->webhook_host,
                .port = cfg->webhook_port,
                .certs = app->certs,
                .tls_min = cfg->tls_min_version,
                .threads = webhook_threads(cfg),
                .max_connections = cfg->webhook_max_connections,
                .connection_memory_limit = cfg->webhook_connection_memory_limit,
                .max_body_bytes = cfg->webhook_max_body_bytes,
                .read_timeout_s = cfg->webhook_read_timeout_s,
                .observer = &app->observer,
        };
        int r;

        r = router_new(&app->webhook_routes);
        if (r == 0)
                r = webhooks_new(app->inventory, &app->hooks);
        if (r == 0)
                r = webhooks_register_with(app->hooks, app->webhook_routes);
        if (r < 0) {
                *reterr = xasprintf("webhook routes: %s", cm_strerror(r));
                return r;
        }
        router_freeze(app->webhook_routes);
        cache_path_series(app);
        opts.router = app->webhook_routes;
        app->observer =
                (struct http_observer){ .begin = observe_begin, .end = observe_end, .ud = app };
        return http_server_start(&opts, &app->webhook, reterr);
}

/* Starts a plain-HTTP listener on addr ("host:port", ":port"; "0" disables it). */
static int start_plain(const char *name,
                       const char *addr,
                       const struct router *routes,
                       struct http_server **ret,
                       char **reterr)
{
        struct http_server_opts opts = { .name = name,
                                         .router = routes,
                                         .threads = 1,
                                         .max_connections = 64,
                                         .max_body_bytes = 4096 };
        char *host = NULL;
        int r;

        if (strcmp(addr, "0") == 0)
                return CM_OK;
        r = parse_host_port(addr, &host, &opts.port);
        if (r < 0) {
                *reterr = xasprintf("%s address \"%s\": expected host:port", name, addr);
                return r;
        }
        opts.host = host;
        r = http_server_start(&opts, ret, reterr);
        free(host);
        return r;
}

static int start_health(struct app *app, char **reterr)
{
        int r;

        r = health_new(&app->health);
        if (r == 0)
                r = health_add_check(app->health, HEALTH_LIVE | HEALTH_READY, "ping",
                                     health_check_ping, NULL);
        if (r == 0)
                r = health_add_check(app->health, HEALTH_READY, "webhook", check_webhook_ready,
                                     app);
        if (r == 0 && app->inventory)
                r = health_add_check(app->health, HEALTH_READY, "maas-inventory",
                                     maas_inventory_health, app->inventory);
        if (r == 0)
                r = router_new(&app->health_routes);
        if (r == 0)
                r = health_register_routes(app->health, app->health_routes);
        if (r < 0) {
                *reterr = xasprintf("health routes: %s", cm_strerror(r));
                return r;
        }
        router_freeze(app->health_routes);
        return start_plain("health", app->cfg->health_addr, app->health_routes, &app->health_srv,
                           reterr);
}

static int start_metrics_server(struct app *app, char **reterr)
{
        int r;

        r = router_new(&app->metrics_routes);
        if (r == 0)
                r = router_add(app->metrics_routes, &(struct route){ .path = "/metrics",
                                                                     .method = "GET",
                                                                     .fn = serve_metrics,
                                                                     .ud = app });
        if (r < 0) {
                *reterr = xasprintf("metrics routes: %s", cm_strerror(r));
                return r;
        }
        router_freeze(app->metrics_routes);
        return start_plain("metrics", app->cfg->metrics_bind_addr, app->metrics_routes,
                           &app->metrics_srv, reterr);
}

/* The MAAS inventory cache behind the admission MAAS checks (beyond.md B1): only when MAAS
 * is configured and --admission-maas-checks is on. */
static int start_inventory(struct app *app, char **reterr)
{
        const struct config *cfg = app->cfg;
        struct maas_config mc = { 0 };
        int r;

        if (!cfg->admission_maas_checks || !cfg->maas_endpoint || !cfg->maas_api_key) {
                log_info("setup", "admission MAAS checks are off", "reason=%s",
                         cfg->admission_maas_checks ? "MAAS is not configured"
                                                    : "--admission-maas-checks=false");
                return CM_OK;
        }
        r = maas_config_parse(cfg->maas_endpoint, cfg->maas_api_key, &mc, reterr);
        if (r == 0)
                r = maas_inventory_new(
                        &(struct maas_inventory_opts){
                                .cfg = &mc,
                                .http = { .ca_file = cfg->maas_ca_file,
                                          .insecure_skip_verify = cfg->maas_insecure_skip_verify },
                                .interval_ms = cfg->maas_inventory_interval_ms,
                                .call_timeout_ms = cfg->maas_timeout_ms < 10000
                                                           ? (uint32_t)cfg->maas_timeout_ms
                                                           : 10000,
                                .metrics = app->metrics },
                        &app->inventory);
        maas_config_release(&mc);
        if (r < 0 && !*reterr)
                *reterr = xasprintf("MAAS inventory: %s", cm_strerror(r));
        return r;
}

/*
 * The controllers: the provider (informers, MaasCluster and MaasMachine reconcilers) runs
 * on the leader only; every replica serves webhooks, health and metrics. Without
 * --leader-elect this process leads at once. Leadership lost (another replica holds the
 * Lease) ends the process with status 1, as controller-runtime does, so Kubernetes
 * restarts it as a clean candidate.
 */
struct controllers {
        struct kube_config kube;
        struct maas_config maas;
        struct kube_ratelimit *limiter;
        struct provider *provider;
        struct leader *leader;
        pthread_mutex_t lock; /* orders on_lead against shutdown */
        bool stopping;
        bool lost;
};

static void on_lead(void *arg)
{
        struct controllers *c = arg;

        pthread_mutex_lock(&c->lock);
        if (!c->stopping) {
                log_info("leader", "became the leader; starting the controllers", "");
                if (provider_start(c->provider) < 0)
                        (void)kill(getpid(), SIGTERM);
        }
        pthread_mutex_unlock(&c->lock);
}

static void on_lost(void *arg)
{
        struct controllers *c = arg;

        log_error("leader", "leadership lost; exiting", "");
        c->lost = true;
        (void)kill(getpid(), SIGTERM);
}

static struct provider_settings provider_settings_of(const struct config *cfg)
{
        return (struct provider_settings){
                .namespace = cfg->namespace,
                .watch_filter = cfg->watch_filter,
                .sync_period_ms = cfg->sync_period_ms,
                .machine_concurrency = cfg->machine_concurrency,
                .cluster_concurrency = cfg->cluster_concurrency,
                .deploy_timeout_ms = cfg->deploy_timeout_ms,
                .machine_refresh_ms = cfg->machine_refresh_ms,
                .maas_timeout_ms = cfg->maas_timeout_ms,
                .release_erase = cfg->release_erase != RELEASE_ERASE_NONE,
                .release_quick_erase = cfg->release_erase == RELEASE_ERASE_QUICK,
        };
}

static int controllers_new(const struct config *cfg,
                           struct metrics *m,
                           struct controllers **ret,
                           char **reterr)
{
        struct controllers *c = xcalloc(1, sizeof(*c));
        int r;

        pthread_mutex_init(&c->lock, NULL);
        r = kube_config_load(cfg->kubeconfig, environ, &c->kube, reterr);
        if (r == 0)
                r = maas_config_parse(cfg->maas_endpoint, cfg->maas_api_key, &c->maas, reterr);
        if (r == 0)
                r = kube_ratelimit_new(cfg->kube_api_qps, cfg->kube_api_burst, NULL, &c->limiter);
        if (r == 0)
                r = provider_new(&(struct provider_opts){ .settings = provider_settings_of(cfg),
                                                          .kube = &c->kube,
                                                          .limiter = c->limiter,
                                                          .maas = &c->maas,
                                                          .metrics = m,
                                                          .maas_ca_file = cfg->maas_ca_file,
                                                          .maas_insecure_skip_verify =
                                                                  cfg->maas_insecure_skip_verify },
                                 &c->provider);
        if (r == 0 && cfg->leader_elect)
                r = leader_new(
                        &(struct leader_opts){ .config = &c->kube,
                                               .limiter = c->limiter,
                                               .namespace = cfg->leader_election_namespace,
                                               .name = cfg->leader_election_id,
                                               .lease_ms = cfg->leader_elect_lease_duration_ms,
                                               .renew_deadline_ms =
                                                       cfg->leader_elect_renew_deadline_ms,
                                               .retry_ms = cfg->leader_elect_retry_period_ms,
                                               .metrics = m,
                                               .on_started = on_lead,
                                               .on_stopped = on_lost,
                                               .arg = c },
                        &c->leader);
        *ret = c;
        return r;
}

static void controllers_free(struct controllers *c)
{
        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        c->stopping = true;
        pthread_mutex_unlock(&c->lock);
        /* Stop reconciling first, then hand the Lease over. */
        provider_stop(c->provider);
        if (c->leader)
                leader_stop(c->leader);
        c->leader = leader_free(c->leader);
        c->provider = provider_free(c->provider);
        c->limiter = kube_ratelimit_free(c->limiter);
        maas_config_release(&c->maas);
        kube_config_release(&c->kube);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

static int start_controllers(struct app *app, char **reterr)
{
        const struct config *cfg = app->cfg;
        int r;

        if (cfg->webhooks_only)
                return CM_OK;
        if (!cfg->maas_endpoint || !cfg->maas_api_key) {
                *reterr = xstrdup("the controllers need MAAS_ENDPOINT and MAAS_API_KEY "
                                  "(or run with --webhooks-only)");
                return CM_EINVAL;
        }
        r = controllers_new(cfg, app->metrics, &app->ctl, reterr);
        if (r == 0 && app->ctl->leader) {
                log_info("leader", "campaigning for leadership", "lease=%s/%s identity=%s",
                         cfg->leader_election_namespace, cfg->leader_election_id,
                         leader_identity(app->ctl->leader));
                r = leader_start(app->ctl->leader);
        } else if (r == 0) {
                r = provider_start(app->ctl->provider);
        }
        if (r < 0 && !*reterr)
                *reterr = xasprintf("controllers: %s", cm_strerror(r));
        return r;
}

static uint16_t port_of(struct http_server *s)
{
        return s ? http_server_port(s) : 0;
}

static int app_start(struct app *app, char **reterr)
{
        int r;

        r = start_metrics(app, reterr);
        if (r == 0)
                r = load_certs(app, reterr);
        if (r == 0)
                r = start_inventory(app, reterr);
        if (r == 0)
                r = start_webhook_server(app, reterr);
        if (r == 0)
                r = start_health(app, reterr);
        if (r == 0)
                r = start_metrics_server(app, reterr);
        if (r < 0)
                return r;
        log_info("setup", "serving",
                 "webhook_port=%u webhook_threads=%u health_port=%u metrics_port=%u cert_dir=%s",
                 port_of(app->webhook), webhook_threads(app->cfg), port_of(app->health_srv),
                 port_of(app->metrics_srv), app->cfg->webhook_cert_dir);
        return start_controllers(app, reterr);
}

static void app_stop(struct app *app)
{
        const struct config *cfg = app->cfg;

        controllers_free(app->ctl);
        app->ctl = NULL;
        if (app->webhook) {
                http_server_quiesce(app->webhook);
                if (!http_server_wait_idle(app->webhook, cfg->graceful_shutdown_timeout_ms))
                        log_warn("shutdown", "requests still in flight at the deadline; closing",
                                 "timeout_ms=%llu",
                                 (unsigned long long)cfg->graceful_shutdown_timeout_ms);
        }
        app->webhook = http_server_free(app->webhook);
        app->metrics_srv = http_server_free(app->metrics_srv);
        app->health_srv = http_server_free(app->health_srv);
        app->hooks = webhooks_free(app->hooks);
        app->inventory = maas_inventory_free(app->inventory);
        app->certs = certstore_free(app->certs);
        app->webhook_routes = router_free(app->webhook_routes);
        app->health_routes = router_free(app->health_routes);
        app->metrics_routes = router_free(app->metrics_routes);
        app->health = health_free(app->health);
        app->metrics = metrics_free(app->metrics);
}

/* Waits for SIGTERM or SIGINT (blocked in every thread since before they started). */
static int wait_for_signal(const sigset_t *set)
{
        int sig = 0;

        while (sigwait(set, &sig) != 0 || (sig != SIGTERM && sig != SIGINT))
                ;
        return sig;
}

static void register_secrets(const struct config *cfg)
{
        const char *key = cfg->maas_api_key;
        const char *last;

        if (!key)
                return;
        /* The whole key and its token secret (the part after the last ':'), which is what
         * an OAuth PLAINTEXT signature carries. */
        log_add_secret(key);
        last = strrchr(key, ':');
        if (last)
                log_add_secret(last + 1);
}

/* The MAAS endpoint and key are checked at start-up, so a typo is a clear error now rather
 * than a failed reconcile later. Both or neither must be set. */
static int check_maas_config(const struct config *cfg, char **reterr)
{
        struct maas_config mc = { 0 };
        int r;

        if (!cfg->maas_endpoint && !cfg->maas_api_key)
                return CM_OK;
        if (!cfg->maas_endpoint || !cfg->maas_api_key) {
                *reterr =
                        xstrdup(cfg->maas_endpoint ? "MAAS_API_KEY is not set (MAAS_ENDPOINT is)"
                                                   : "MAAS_ENDPOINT is not set (MAAS_API_KEY is)");
                return CM_EINVAL;
        }
        r = maas_config_parse(cfg->maas_endpoint, cfg->maas_api_key, &mc, reterr);
        maas_config_release(&mc);
        return r;
}

static int run(const struct config *cfg)
{
        struct app app = { .cfg = cfg };
        sigset_t set;
        char *err = NULL;
        bool lost;
        int sig;

        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        if (app_start(&app, &err) < 0) {
                log_error("setup", "cannot start", "err=%s", err ? err : "unknown");
                free(err);
                app_stop(&app);
                return 1;
        }
        sig = wait_for_signal(&set);
        lost = app.ctl && app.ctl->lost;
        log_info("shutdown", "signal received; stopping", "signal=%s", sigabbrev_np(sig));
        app_stop(&app);
        log_info("shutdown", "stopped", "");
        return lost ? 1 : 0;
}

int main(int argc, char *argv[])
{
        struct config *cfg = NULL;
        char *err = NULL;
        int status;

        signal(SIGPIPE, SIG_IGN);
#ifdef __GLIBC__
        /* Two malloc arenas instead of eight per core: the workers' short-lived cJSON trees
         * otherwise leave each thread its own fragmented arena (about 8 MiB more peak RSS
         * with 1 000 machines, bench/scale.sh), for no measurable throughput on 2 cores. */
        (void)mallopt(M_ARENA_MAX, 2);
#endif
        xalloc_install_cjson_hooks();
        if (config_load(argc, argv, environ, &cfg, &err) < 0) {
                fprintf(stderr, "capmaas: %s\nRun 'capmaas --help' for the options.\n",
                        err ? err : "invalid configuration");
                free(err);
                curl_lib_cleanup();
                return 2;
        }
        if (cfg->help)
                config_print_help(stdout);
        else if (cfg->version)
                printf("capmaas %s\n", CAPMAAS_VERSION);
        log_setup(cfg->logging_format, cfg->verbosity, 2);
        register_secrets(cfg);
        if (!cfg->help && !cfg->version && check_maas_config(cfg, &err) < 0) {
                fprintf(stderr, "capmaas: %s\n", err ? err : "invalid MAAS configuration");
                free(err);
                status = 2;
                goto out;
        }
        status = cfg->help || cfg->version ? 0 : run(cfg);
out:
        log_clear_secrets();
        config_free(cfg);
        curl_lib_cleanup();
        return status;
}
