/*
 * metrics_endpoint: renders the registry into a fresh buffer per scrape; the response owns
 * the body from then on. The secure route asks its authorizer first.
 */
#include "metrics_endpoint.h"

#include <string.h>
#include <strings.h>

#include "buf.h"
#include "metrics.h"
#include "router.h"

#define METRICS_BODY_MAX (16u << 20)
#define USER_NAME_MAX    256

static void serve_metrics(void *ud, const struct http_request *req, struct http_response *resp)
{
        struct metrics *m = ud;
        struct buf out;

        (void)req;
        buf_init(&out, METRICS_BODY_MAX);
        if (metrics_render(m, &out) < 0) {
                buf_release(&out);
                http_response_error(resp, 500, "metrics too large");
                return;
        }
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        resp->body = buf_take(&out, &resp->body_len);
}

/* The token of "Authorization: Bearer <token>" (scheme case-insensitive), or NULL. */
static const char *bearer_token(const struct http_request *req)
{
        const char *h = http_request_header(req, "Authorization");

        if (!h || strncasecmp(h, "Bearer ", 7) != 0)
                return NULL;
        h += 7;
        h += strspn(h, " ");
        return *h ? h : NULL;
}

static void serve_secure(void *ud, const struct http_request *req, struct http_response *resp)
{
        struct metrics_secure *sm = ud;
        const char *token = bearer_token(req);
        char user[USER_NAME_MAX] = "";

        if (!token) {
                http_response_error(resp, 401, "Unauthorized");
                return;
        }
        switch (sm->authz.check(sm->authz.ud, token, "get", req->path, user, sizeof(user))) {
        case METRICS_AUTH_ALLOWED:
                serve_metrics(sm->m, req, resp);
                return;
        case METRICS_AUTH_UNAUTHENTICATED:
                http_response_error(resp, 401, "Unauthorized");
                return;
        case METRICS_AUTH_FORBIDDEN:
                http_response_error(resp, 403, "Authorization denied for user %s", user);
                return;
        case METRICS_AUTH_ERROR:
                break;
        }
        http_response_error(resp, 500, "Authorization failed");
}

int metrics_endpoint_add(struct router *r, struct metrics *m)
{
        return router_add(
                r, &(struct route){
                           .path = "/metrics", .method = "GET", .fn = serve_metrics, .ud = m });
}

int metrics_endpoint_add_secure(struct router *r, struct metrics_secure *sec)
{
        return router_add(
                r, &(struct route){
                           .path = "/metrics", .method = "GET", .fn = serve_secure, .ud = sec });
}
