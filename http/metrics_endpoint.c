/*
 * metrics_endpoint: renders the registry into a fresh buffer per scrape; the response owns
 * the body from then on.
 */
#include "metrics_endpoint.h"

#include "buf.h"
#include "metrics.h"
#include "router.h"

#define METRICS_BODY_MAX (16u << 20)

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

int metrics_endpoint_add(struct router *r, struct metrics *m)
{
        return router_add(
                r, &(struct route){
                           .path = "/metrics", .method = "GET", .fn = serve_metrics, .ud = m });
}
