/*
 * endpoints: the eight admission routes. Each request runs decode -> kind check -> the
 * kind's defaulting or validation -> encode. Malformed reviews are answered with HTTP 400
 * and a message; a well-formed review always gets 200 with allowed true or false. The cJSON
 * trees of a request live in the thread's arena scope (arena.h) and die with the request.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "arena.h"
#include "compiler.h"
#include "err.h"
#include "router.h"
#include "webhook_kinds.h"
#include "webhooks.h"
#include "xalloc.h"

#define PATH(verb, kind) "/" verb "-infrastructure-cluster-x-k8s-io-v1beta1-" kind

const struct webhook_endpoint webhook_endpoints[] = {
        { PATH("mutate", "maascluster"), "mmaascluster.kb.io", "MaasCluster", "maasclusters", 1 },
        { PATH("validate", "maascluster"), "vmaascluster.kb.io", "MaasCluster", "maasclusters", 0 },
        { PATH("mutate", "maasmachine"), "mmaasmachine.kb.io", "MaasMachine", "maasmachines", 1 },
        { PATH("validate", "maasmachine"), "vmaasmachine.kb.io", "MaasMachine", "maasmachines", 0 },
        { PATH("mutate", "maasmachinetemplate"), "mmaasmachinetemplate.kb.io",
          "MaasMachineTemplate", "maasmachinetemplates", 1 },
        { PATH("validate", "maasmachinetemplate"), "vmaasmachinetemplate.kb.io",
          "MaasMachineTemplate", "maasmachinetemplates", 0 },
        { PATH("mutate", "maasclustertemplate"), "mmaasclustertemplate.kb.io",
          "MaasClusterTemplate", "maasclustertemplates", 1 },
        { PATH("validate", "maasclustertemplate"), "vmaasclustertemplate.kb.io",
          "MaasClusterTemplate", "maasclustertemplates", 0 },
};

const size_t webhook_endpoints_n = ARRAY_SIZE(webhook_endpoints);

static void bad_request(struct http_response *resp, const char *what)
{
        http_response_error(resp, 400, "bad AdmissionReview: %s", what);
}

/* The object under review must be of the endpoint's kind (request.kind, and the object's
 * own kind when it says one). */
static bool kind_matches(const struct webhook_endpoint *ep,
                         const struct admission_request *req,
                         char **reterr)
{
        const cJSON *obj = req->object ? req->object : req->old_object;
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(obj, "kind");

        if (strcmp(req->kind, ep->kind) != 0) {
                *reterr = xasprintf("request.kind.kind: this endpoint admits %s, got \"%s\"",
                                    ep->kind, req->kind);
                return false;
        }
        if (cJSON_IsString(k) && strcmp(k->valuestring, ep->kind) != 0) {
                *reterr = xasprintf("request.object.kind: this endpoint admits %s, got \"%s\"",
                                    ep->kind, k->valuestring);
                return false;
        }
        if (!obj && req->op != ADMISSION_OP_DELETE) {
                *reterr = xstrdup("request.object: required for this operation");
                return false;
        }
        return true;
}

struct webhook_route {
        const struct webhook_endpoint *ep;
        struct maas_inventory *inv;
};

struct webhooks {
        struct webhook_route routes[ARRAY_SIZE(webhook_endpoints)];
};

static void serve_one(const struct webhook_endpoint *ep,
                      struct maas_inventory *inv,
                      const struct http_request *hreq,
                      struct http_response *hresp)
{
        struct admission_request req = { .op = ADMISSION_OP_INVALID };
        struct admission_response resp = { .allowed = true };
        char *err = NULL;

        arena_scope_begin(); /* every cJSON tree of this request is freed before the end */
        if (admission_request_decode(hreq->body, hreq->body_len, &req, &err) < 0 ||
            !kind_matches(ep, &req, &err)) {
                bad_request(hresp, err);
                goto out;
        }
        if (ep->mutating)
                webhook_default(ep->kind, &req, &resp);
        else
                webhook_validate_maas(ep->kind, &req, inv, &resp);
        if (admission_response_encode(&req, &resp, &hresp->body) < 0) {
                http_response_error(hresp, 500, "cannot encode the AdmissionReview response");
                goto out;
        }
        hresp->body_len = strlen(hresp->body);
        hresp->content_type = "application/json";
        hresp->status = 200;
out:
        free(err);
        admission_request_release(&req);
        admission_response_release(&resp);
        arena_scope_end();
}

static void serve(void *ud, const struct http_request *hreq, struct http_response *hresp)
{
        serve_one(ud, NULL, hreq, hresp);
}

static void serve_routed(void *ud, const struct http_request *hreq, struct http_response *hresp)
{
        const struct webhook_route *wr = ud;

        serve_one(wr->ep, wr->inv, hreq, hresp);
}

static int add_routes(struct router *r,
                      http_handler_fn *fn,
                      void *(*ud_of)(void *, size_t),
                      void *ctx)
{
        for (size_t i = 0; i < webhook_endpoints_n; i++) {
                int ret = router_add(r, &(struct route){ .path = webhook_endpoints[i].path,
                                                         .method = "POST",
                                                         .fn = fn,
                                                         .ud = ud_of(ctx, i),
                                                         .flags = ROUTE_JSON_BODY });

                if (ret < 0)
                        return ret;
        }
        return CM_OK;
}

static void *endpoint_ud(void *ctx, size_t i)
{
        (void)ctx;
        return (void *)(uintptr_t)&webhook_endpoints[i];
}

static void *route_ud(void *ctx, size_t i)
{
        struct webhooks *w = ctx;

        return &w->routes[i];
}

int webhooks_register(struct router *r)
{
        return add_routes(r, serve, endpoint_ud, NULL);
}

int webhooks_new(struct maas_inventory *inv, struct webhooks **ret)
{
        struct webhooks *w = xcalloc(1, sizeof(*w));

        for (size_t i = 0; i < webhook_endpoints_n; i++)
                w->routes[i] = (struct webhook_route){ .ep = &webhook_endpoints[i], .inv = inv };
        *ret = w;
        return CM_OK;
}

struct webhooks *webhooks_free(struct webhooks *w)
{
        free(w);
        return NULL;
}

int webhooks_register_with(struct webhooks *w, struct router *r)
{
        return add_routes(r, serve_routed, route_ud, w);
}
