/*
 * serving: assembles the listeners. The webhook server (HTTPS, one event loop per usable
 * CPU up to WEBHOOK_AUTO_THREADS_MAX) serves the admission routes with the
 * controller-runtime series on every request. The diagnostics server serves /metrics over
 * HTTPS with the webhook certificate, behind TokenReview and SubjectAccessReview
 * (kube_authn), or over plain HTTP without authentication with --insecure-diagnostics; it
 * has its own event loop, so a slow review never holds up a webhook. Health (the ping,
 * webhook and MAAS inventory checks) and the deprecated --metrics-bind-addr are small
 * plain-HTTP listeners. Each is disabled by the address "0". Shutdown quiesces the webhook
 * server first so requests in flight finish.
 */
#include "serving.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "certstore.h"
#include "config.h"
#include "cpus.h"
#include "err.h"
#include "health.h"
#include "http_server.h"
#include "kube_authn.h"
#include "kube_client.h"
#include "log.h"
#include "maas_inventories.h"
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
#define REVIEW_TIMEOUT_MS        5000u /* per TokenReview or SubjectAccessReview */

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
        char *tls_ciphers;                /* owned; NULL = GnuTLS's suites */
        struct kube_config kube;          /* owned; the secure diagnostics' API server */
        struct kube_authn *authn;         /* owned; NULL unless diagnostics are secure */
        struct metrics_secure diag_auth;  /* the secure /metrics route's user data */
        struct router *diag_routes;       /* owned */
        struct http_server *diag_srv;     /* owned */
        struct maas_inventory *inventory; /* borrowed; NULL when the MAAS checks are off */
        struct webhooks *hooks;           /* owned */
        /* borrowed; per-cluster MAAS inventories (spec.identityRef), NULL without MAAS
         * checks */
        struct maas_inventories *inventories;
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
        s->tls_ciphers = config_tls_cipher_priorities(&cfg->tls_cipher_suites);
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
                .tls_ciphers = s->tls_ciphers,
                .threads = webhook_threads(cfg),
                .max_connections = cfg->webhook_max_connections,
                .connection_memory_limit = cfg->webhook_connection_memory_limit,
                .max_body_bytes = cfg->webhook_max_body_bytes,
                .read_timeout_s = cfg->webhook_read_timeout_s,
                .read_header_timeout_ms = cfg->webhook_read_header_timeout_ms,
                .max_connections_per_address = cfg->webhook_max_connections_per_address,
                .observer = &s->wi.observer,
        };
        int r;

        r = router_new(&s->webhook_routes);
        if (r < 0)
                return r;
        r = webhooks_new_opts(
                &(struct webhooks_opts){ .inv = s->inventory,
                                         .source = maas_inventories_source(s->inventories),
                                         .metrics = s->metrics },
                &s->hooks);
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

/* Starts a one-thread listener on addr ("host:port", ":port"; "0" disables it): plain
 * HTTP, or HTTPS when tls is given (its router is taken from routes). 64 connections, 32
 * from one address (the kubelet's probes and Prometheus come from their own), 5 s to send
 * the headers and 10 s for the whole request, like the webhook's defaults: a crowd of slow
 * clients cannot starve a probe. */
static int start_small(const char *name,
                       const char *addr,
                       const struct router *routes,
                       const struct http_server_opts *tls,
                       struct http_server **ret,
                       char **reterr)
{
        struct http_server_opts opts = { .name = name,
                                         .router = routes,
                                         .threads = 1,
                                         .max_connections = 64,
                                         .max_connections_per_address = 32,
                                         .max_body_bytes = 4096 };
        char *host = NULL;
        int r;

        if (tls) {
                opts.certs = tls->certs;
                opts.tls_min = tls->tls_min;
                opts.tls_ciphers = tls->tls_ciphers;
        }
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
        return start_small("health", s->cfg->health_addr, s->health_routes, NULL, &s->health_srv,
                           reterr);
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
        if (strcmp(s->cfg->metrics_bind_addr, "0") != 0)
                log_warn("setup",
                         "--metrics-bind-addr is deprecated: /metrics is served there "
                         "over plain HTTP without authentication; use --diagnostics-address",
                         "addr=%s", s->cfg->metrics_bind_addr);
        return start_small("metrics", s->cfg->metrics_bind_addr, s->metrics_routes, NULL,
                           &s->metrics_srv, reterr);
}

static enum metrics_auth authorize(void *ud,
                                   const char *token,
                                   const char *verb,
                                   const char *path,
                                   char *user,
                                   size_t user_size)
{
        switch (kube_authn_check(ud, token, verb, path, user, user_size)) {
        case KUBE_AUTHN_ALLOWED:
                return METRICS_AUTH_ALLOWED;
        case KUBE_AUTHN_UNAUTHENTICATED:
                return METRICS_AUTH_UNAUTHENTICATED;
        case KUBE_AUTHN_DENIED:
                return METRICS_AUTH_FORBIDDEN;
        case KUBE_AUTHN_ERROR:
                break;
        }
        return METRICS_AUTH_ERROR;
}

/* The secure diagnostics routes: /metrics behind the API server's reviews. */
static int secure_routes(struct serving *s, char **reterr)
{
        char *why = NULL;
        int r;

        r = kube_config_load(s->cfg->kubeconfig, environ, &s->kube, &why);
        if (r == 0)
                r = kube_authn_new(&(struct kube_authn_opts){ .config = &s->kube,
                                                              .timeout_ms = REVIEW_TIMEOUT_MS },
                                   &s->authn);
        if (r < 0) {
                *reterr = xasprintf("diagnostics: the secure /metrics authenticates scrapers "
                                    "with TokenReview and needs the Kubernetes API (%s); use "
                                    "--insecure-diagnostics or --diagnostics-address=0",
                                    why ? why : cm_strerror(r));
                free(why);
                return r;
        }
        s->diag_auth = (struct metrics_secure){ .m = s->metrics,
                                                .authz = { .check = authorize, .ud = s->authn } };
        r = router_new(&s->diag_routes);
        if (r == 0)
                r = metrics_endpoint_add_secure(s->diag_routes, &s->diag_auth);
        if (r < 0)
                *reterr = xasprintf("diagnostics routes: %s", cm_strerror(r));
        return r;
}

/* --diagnostics-address: HTTPS with the webhook certificate and authorization, or plain
 * HTTP with --insecure-diagnostics. */
static int start_diagnostics(struct serving *s, char **reterr)
{
        const struct config *cfg = s->cfg;
        struct http_server_opts tls = { .certs = s->certs,
                                        .tls_min = cfg->tls_min_version,
                                        .tls_ciphers = s->tls_ciphers };
        int r;

        if (strcmp(cfg->diagnostics_address, "0") == 0)
                return CM_OK;
        if (cfg->insecure_diagnostics)
                return start_small("diagnostics", cfg->diagnostics_address, s->metrics_routes, NULL,
                                   &s->diag_srv, reterr);
        r = secure_routes(s, reterr);
        if (r < 0)
                return r;
        router_freeze(s->diag_routes);
        return start_small("diagnostics", cfg->diagnostics_address, s->diag_routes, &tls,
                           &s->diag_srv, reterr);
}

static uint16_t port_of(struct http_server *srv)
{
        return srv ? http_server_port(srv) : 0;
}

int serving_start(struct serving *s,
                  struct maas_inventory *inv,
                  struct maas_inventories *inventories,
                  char **reterr)
{
        int r;

        s->inventory = inv;
        s->inventories = inv ? inventories : NULL;
        r = start_webhook_server(s, reterr);
        if (r == 0)
                r = start_health(s, reterr);
        if (r == 0)
                r = start_metrics_server(s, reterr);
        if (r == 0)
                r = start_diagnostics(s, reterr);
        if (r < 0)
                return r;
        log_info("setup", "serving",
                 "webhook_port=%u webhook_threads=%u health_port=%u metrics_port=%u "
                 "diagnostics_port=%u diagnostics=%s cert_dir=%s",
                 port_of(s->webhook), webhook_threads(s->cfg), port_of(s->health_srv),
                 port_of(s->metrics_srv), port_of(s->diag_srv),
                 !s->diag_srv                   ? "off"
                 : s->cfg->insecure_diagnostics ? "insecure"
                                                : "https",
                 s->cfg->webhook_cert_dir);
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
        s->diag_srv = http_server_free(s->diag_srv);
        s->authn = kube_authn_free(s->authn);
        kube_config_release(&s->kube);
        s->health_srv = http_server_free(s->health_srv);
        s->hooks = webhooks_free(s->hooks);
        s->inventories = NULL;
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
        s->diag_routes = router_free(s->diag_routes);
        s->authn = kube_authn_free(s->authn);
        kube_config_release(&s->kube);
        free(s->tls_ciphers);
        s->health = health_free(s->health);
        s->metrics = metrics_free(s->metrics);
        free(s);
        return NULL;
}
