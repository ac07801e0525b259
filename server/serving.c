/*
 * serving: assembles the three listeners. The webhook server (HTTPS, one event loop per
 * usable CPU up to WEBHOOK_AUTO_THREADS_MAX) serves the admission routes with the
 * controller-runtime series on every request; health (the ping, webhook and MAAS inventory
 * checks) and metrics (the registry) are small plain-HTTP listeners, each disabled by the
 * address "0". Shutdown quiesces the webhook server first so requests in flight finish.
 */
#include "serving.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "certstore.h"
#include "config.h"
#include "cpus.h"
#include "err.h"
#include "health.h"
#include "http_server.h"
#include "log.h"
#include "maas_inventory.h"
#include "metrics.h"
#include "metrics_endpoint.h"
#include "parse.h"
#include "process_metrics.h"
#include "router.h"
#include "webhook_metrics.h"
#include "webhooks.h"
#include "xalloc.h"

#define WEBHOOK_AUTO_THREADS_MAX 4u

struct serving {
        const struct config *cfg;         /* borrowed */
        struct metrics *metrics;          /* owned */
        struct webhook_instruments wi;    /* families owned by metrics */
        struct certstore *certs;          /* owned */
        struct router *webhook_routes;    /* owned */
        struct router *health_routes;     /* owned */
        struct router *metrics_routes;    /* owned */
        struct health *health;            /* owned */
        struct http_server *webhook;      /* owned */
        struct http_server *health_srv;   /* owned */
        struct http_server *metrics_srv;  /* owned */
        struct maas_inventory *inventory; /* borrowed; NULL when the MAAS checks are off */
        struct webhooks *hooks;           /* owned */
};

static bool check_webhook_ready(void *ud, char **ret_reason)
{
        struct serving *s = ud;
        struct certstore_stats st;

        if (!s->webhook) {
                *ret_reason = xstrdup("webhook server not started");
                return false;
        }
        certstore_stats(s->certs, &st);
        if (!st.loaded || (st.not_after && st.not_after <= time(NULL))) {
                *ret_reason = xstrdup("serving certificate missing or expired");
                return false;
        }
        return true;
}

static int start_metrics(struct serving *s, char **reterr)
{
        int r;

        r = metrics_new(&s->metrics);
        if (r == 0)
                r = process_metrics_register(s->metrics);
        if (r == 0)
                r = webhook_instruments_register(&s->wi, s->metrics);
        if (r < 0)
                *reterr = xasprintf("metrics registry: %s", cm_strerror(r));
        return r;
}

static int load_certs(struct serving *s, char **reterr)
{
        const struct config *cfg = s->cfg;
        char *cert = xasprintf("%s/%s", cfg->webhook_cert_dir, cfg->webhook_cert_name);
        char *key = xasprintf("%s/%s", cfg->webhook_cert_dir, cfg->webhook_key_name);
        struct certstore_opts opts = {
                .cert_path = cert,
                .key_path = key,
                .retire_ms = 2000u * 1000u * (uint64_t)cfg->webhook_read_timeout_s + 60000u,
        };
        int r;

        r = certstore_new(&opts, &s->certs, reterr);
        s->wi.certs = s->certs;
        if (r == 0)
                r = certstore_start(s->certs);
        free(cert);
        free(key);
        return r;
}

int serving_new(const struct config *cfg, struct serving **ret, char **reterr)
{
        struct serving *s = xcalloc(1, sizeof(*s));
        int r;

        s->cfg = cfg;
        *ret = s;
        r = start_metrics(s, reterr);
        if (r == 0)
                r = load_certs(s, reterr);
        return r;
}

struct metrics *serving_metrics(const struct serving *s)
{
        return s->metrics;
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

static int start_webhook_server(struct serving *s, char **reterr)
{
        const struct config *cfg = s->cfg;
        struct http_server_opts opts = {
                .name = "webhook",
                .host = cfg->webhook_host,
                .port = cfg->webhook_port,
                .certs = s->certs,
                .tls_min = cfg->tls_min_version,
                .threads = webhook_threads(cfg),
                .max_connections = cfg->webhook_max_connections,
                .connection_memory_limit = cfg->webhook_connection_memory_limit,
                .max_body_bytes = cfg->webhook_max_body_bytes,
                .read_timeout_s = cfg->webhook_read_timeout_s,
                .observer = &s->wi.observer,
        };
        int r;

        r = router_new(&s->webhook_routes);
        if (r == 0)
                r = webhooks_new(s->inventory, &s->hooks);
        if (r == 0)
                r = webhooks_register_with(s->hooks, s->webhook_routes);
        if (r < 0) {
                *reterr = xasprintf("webhook routes: %s", cm_strerror(r));
                return r;
        }
        router_freeze(s->webhook_routes);
        for (size_t i = 0; i < webhook_endpoints_n; i++)
                webhook_instruments_add_path(&s->wi, webhook_endpoints[i].path);
        opts.router = s->webhook_routes;
        return http_server_start(&opts, &s->webhook, reterr);
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

static int start_health(struct serving *s, char **reterr)
{
        int r;

        r = health_new(&s->health);
        if (r == 0)
                r = health_add_check(s->health, HEALTH_LIVE | HEALTH_READY, "ping",
                                     health_check_ping, NULL);
        if (r == 0)
                r = health_add_check(s->health, HEALTH_READY, "webhook", check_webhook_ready, s);
        if (r == 0 && s->inventory)
                r = health_add_check(s->health, HEALTH_READY, "maas-inventory",
                                     maas_inventory_health, s->inventory);
        if (r == 0)
                r = router_new(&s->health_routes);
        if (r == 0)
                r = health_register_routes(s->health, s->health_routes);
        if (r < 0) {
                *reterr = xasprintf("health routes: %s", cm_strerror(r));
                return r;
        }
        router_freeze(s->health_routes);
        return start_plain("health", s->cfg->health_addr, s->health_routes, &s->health_srv, reterr);
}

static int start_metrics_server(struct serving *s, char **reterr)
{
        int r;

        r = router_new(&s->metrics_routes);
        if (r == 0)
                r = metrics_endpoint_add(s->metrics_routes, s->metrics);
        if (r < 0) {
                *reterr = xasprintf("metrics routes: %s", cm_strerror(r));
                return r;
        }
        router_freeze(s->metrics_routes);
        return start_plain("metrics", s->cfg->metrics_bind_addr, s->metrics_routes, &s->metrics_srv,
                           reterr);
}

static uint16_t port_of(struct http_server *srv)
{
        return srv ? http_server_port(srv) : 0;
}

int serving_start(struct serving *s, struct maas_inventory *inv, char **reterr)
{
        int r;

        s->inventory = inv;
        r = start_webhook_server(s, reterr);
        if (r == 0)
                r = start_health(s, reterr);
        if (r == 0)
                r = start_metrics_server(s, reterr);
        if (r < 0)
                return r;
        log_info("setup", "serving",
                 "webhook_port=%u webhook_threads=%u health_port=%u metrics_port=%u cert_dir=%s",
                 port_of(s->webhook), webhook_threads(s->cfg), port_of(s->health_srv),
                 port_of(s->metrics_srv), s->cfg->webhook_cert_dir);
        return CM_OK;
}

void serving_stop(struct serving *s)
{
        const struct config *cfg = s->cfg;

        if (s->webhook) {
                http_server_quiesce(s->webhook);
                if (!http_server_wait_idle(s->webhook, cfg->graceful_shutdown_timeout_ms))
                        log_warn("shutdown", "requests still in flight at the deadline; closing",
                                 "timeout_ms=%llu",
                                 (unsigned long long)cfg->graceful_shutdown_timeout_ms);
        }
        s->webhook = http_server_free(s->webhook);
        s->metrics_srv = http_server_free(s->metrics_srv);
        s->health_srv = http_server_free(s->health_srv);
        s->hooks = webhooks_free(s->hooks);
        s->inventory = NULL;
}

struct serving *serving_free(struct serving *s)
{
        if (!s)
                return NULL;
        s->certs = certstore_free(s->certs);
        s->webhook_routes = router_free(s->webhook_routes);
        s->health_routes = router_free(s->health_routes);
        s->metrics_routes = router_free(s->metrics_routes);
        s->health = health_free(s->health);
        s->metrics = metrics_free(s->metrics);
        free(s);
        return NULL;
}
