/*
 * health: the probe handlers. The check list is built before the server starts and read
 * without a lock afterwards.
 */
#include "health.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "log.h"
#include "router.h"
#include "xalloc.h"

#define HEALTH_CHECKS_MAX 16
#define EXCLUDES_MAX      16

struct health_check {
        char *name;
        unsigned endpoints;
        health_check_fn *fn;
        void *ud;
};

struct health_endpoint_ctx {
        struct health *h;
        enum health_endpoint which;
        const char *name; /* "healthz" or "readyz" */
};

struct health {
        struct health_check checks[HEALTH_CHECKS_MAX];
        size_t n;
        struct health_endpoint_ctx live;
        struct health_endpoint_ctx ready;
};

int health_new(struct health **ret)
{
        struct health *h = xcalloc(1, sizeof(*h));

        h->live = (struct health_endpoint_ctx){ .h = h, .which = HEALTH_LIVE, .name = "healthz" };
        h->ready = (struct health_endpoint_ctx){ .h = h, .which = HEALTH_READY, .name = "readyz" };
        *ret = h;
        return CM_OK;
}

struct health *health_free(struct health *h)
{
        if (!h)
                return NULL;
        for (size_t i = 0; i < h->n; i++)
                free(h->checks[i].name);
        free(h);
        return NULL;
}

int health_add_check(
        struct health *h, unsigned endpoints, const char *name, health_check_fn *fn, void *ud)
{
        if (h->n == HEALTH_CHECKS_MAX)
                return CM_ETOOBIG;
        h->checks[h->n++] = (struct health_check){
                .name = xstrdup(name), .endpoints = endpoints, .fn = fn, .ud = ud
        };
        return CM_OK;
}

bool health_check_ping(void *ud, char **ret_reason)
{
        (void)ud;
        (void)ret_reason;
        return true;
}

static bool run_check(const struct health_endpoint_ctx *ep, const struct health_check *c)
{
        char *reason = NULL;
        bool ok = c->fn(c->ud, &reason);

        if (!ok)
                log_info("health", "check failed", "endpoint=%s check=%s reason=%s", ep->name,
                         c->name, reason ? reason : "unknown");
        free(reason);
        return ok;
}

static bool is_excluded(const char *name, const char **excl, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (strcmp(excl[i], name) == 0)
                        return true;
        return false;
}

/* /healthz/<name>: one check. */
static void serve_one(const struct health_endpoint_ctx *ep,
                      const char *name,
                      struct http_response *resp)
{
        const struct health *h = ep->h;

        for (size_t i = 0; i < h->n; i++) {
                const struct health_check *c = &h->checks[i];

                if (!(c->endpoints & ep->which) || strcmp(c->name, name) != 0)
                        continue;
                if (run_check(ep, c))
                        http_response_error(resp, 200, "ok");
                else
                        http_response_error(resp, 500, "internal server error: %s check failed",
                                            name);
                return;
        }
        http_response_error(resp, 404, "404 page not found");
}

static void serve_all(const struct health_endpoint_ctx *ep,
                      const struct http_request *req,
                      struct http_response *resp)
{
        const char *excl[EXCLUDES_MAX];
        size_t n_excl = http_request_query_all(req, "exclude", excl, EXCLUDES_MAX);
        const char *ignored;
        bool verbose = http_request_query(req, "verbose", &ignored);
        struct buf out;
        bool all_ok = true;

        buf_init(&out, 64 * 1024);
        for (size_t i = 0; i < ep->h->n; i++) {
                const struct health_check *c = &ep->h->checks[i];
                bool ok;

                if (!(c->endpoints & ep->which) || is_excluded(c->name, excl, n_excl))
                        continue;
                ok = run_check(ep, c);
                all_ok = all_ok && ok;
                (void)!buf_printf(&out, ok ? "[+]%s ok\n" : "[-]%s failed: reason withheld\n",
                                  c->name);
        }
        (void)!buf_printf(&out, "%s check %s\n", ep->name, all_ok ? "passed" : "failed");
        resp->status = all_ok ? 200 : 500;
        if (all_ok && !verbose) {
                buf_release(&out);
                resp->body = xstrdup("ok");
        } else {
                resp->body = buf_take(&out, NULL);
        }
        resp->body_len = strlen(resp->body);
        (void)!http_response_add_header(resp, "X-Content-Type-Options", "nosniff");
}

static void serve(void *ud, const struct http_request *req, struct http_response *resp)
{
        const struct health_endpoint_ctx *ep = ud;
        size_t base = strlen(ep->name) + 1; /* "/healthz" */

        if (req->path[base] == '/' && req->path[base + 1])
                serve_one(ep, req->path + base + 1, resp);
        else if (req->path[base] == '\0' || (req->path[base] == '/' && !req->path[base + 1]))
                serve_all(ep, req, resp);
        else
                http_response_error(resp, 404, "404 page not found");
}

int health_register_routes(struct health *h, struct router *r)
{
        static const char *const methods[] = { "GET", "HEAD" };
        int ret = CM_OK;

        for (size_t i = 0; i < ARRAY_SIZE(methods) && ret == CM_OK; i++) {
                ret = router_add(r, &(struct route){ .path = "/healthz",
                                                     .method = methods[i],
                                                     .fn = serve,
                                                     .ud = &h->live,
                                                     .flags = ROUTE_PREFIX });
                if (ret == CM_OK)
                        ret = router_add(r, &(struct route){ .path = "/readyz",
                                                             .method = methods[i],
                                                             .fn = serve,
                                                             .ud = &h->ready,
                                                             .flags = ROUTE_PREFIX });
        }
        return ret;
}
