/*
 * endpoints: the twelve admission routes. Each request runs scan -> budget -> decode -> kind
 * check -> the kind's defaulting or validation -> encode. Malformed reviews (and reviews over
 * a budget) are answered with HTTP 400 and a message, reviews the decode budget cannot hold
 * now with 429; a well-formed review always gets 200 with allowed true or false. The cJSON
 * trees of a request live in the thread's arena scope (arena.h) and die with the request.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "arena.h"
#include "compiler.h"
#include "decode_budget.h"
#include "err.h"
#include "json.h"
#include "metrics.h"
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
        { PATH("mutate", "maasremediation"), "mmaasremediation.kb.io", "MaasRemediation",
          "maasremediations", 1 },
        { PATH("validate", "maasremediation"), "vmaasremediation.kb.io", "MaasRemediation",
          "maasremediations", 0 },
        { PATH("mutate", "maasremediationtemplate"), "mmaasremediationtemplate.kb.io",
          "MaasRemediationTemplate", "maasremediationtemplates", 1 },
        { PATH("validate", "maasremediationtemplate"), "vmaasremediationtemplate.kb.io",
          "MaasRemediationTemplate", "maasremediationtemplates", 0 },
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
        const cJSON *k = json_item(obj, "kind");

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
        const struct webhooks_inventory_source *source; /* NULL = inv for everything */
        struct decode_budget *budget;
};

struct webhooks {
        struct webhook_route routes[ARRAY_SIZE(webhook_endpoints)];
        struct decode_budget budget;
};

/* The budget of the routes webhooks_register adds (no struct webhooks to hold one). */
static struct decode_budget shared_budget;
static pthread_once_t shared_budget_once = PTHREAD_ONCE_INIT;

static void shared_budget_init(void)
{
        decode_budget_init(&shared_budget, WEBHOOKS_DECODE_BUDGET_DEFAULT,
                           WEBHOOKS_DECODE_WAIT_MS_DEFAULT);
}

static void too_busy(struct http_response *resp)
{
        http_response_error(resp, 429,
                            "too many large AdmissionReviews are being decoded at once; "
                            "retry after 1 s");
        (void)!http_response_add_header(resp, "Retry-After", "1"); /* the first header */
}

/* Gives back the heap a large request freed: its tree's chunks (and an earlier body's)
 * would otherwise stay in the allocator's free lists, counted in the process's RSS. */
static void trim_after(size_t body_len, size_t tree_bytes)
{
#ifdef __GLIBC__
        if (body_len >= WEBHOOKS_TRIM_BYTES || tree_bytes >= WEBHOOKS_TRIM_BYTES)
                (void)malloc_trim(0);
#else
        (void)body_len;
        (void)tree_bytes;
#endif
}

/* Validates against the MAAS of the object's cluster: the source's inventory when the
 * cluster names an identity, inv otherwise; no MAAS checks (a warning) when the source
 * cannot tell. */
static void validate_routed(const struct webhook_endpoint *ep,
                            struct maas_inventory *inv,
                            const struct webhooks_inventory_source *src,
                            const struct admission_request *req,
                            struct admission_response *resp)
{
        const char *cluster = json_find_str(req->object, "metadata", "labels",
                                            "cluster.x-k8s.io/cluster-name", NULL);
        struct maas_inventory *own = NULL;
        char *why = NULL;

        if (!inv || !src || !src->acquire || !cluster || !*cluster) {
                webhook_validate_maas(ep->kind, req, inv, resp);
                return;
        }
        if (src->acquire(src->ud, req->namespace, cluster, &own, &why) < 0) {
                admission_response_warn(resp, "MAAS checks skipped: %s",
                                        why ? why : "the cluster's MAAS is unknown");
                free(why);
                webhook_validate_maas(ep->kind, req, NULL, resp);
                return;
        }
        webhook_validate_maas(ep->kind, req, own ? own : inv, resp);
        if (own)
                src->release(src->ud, own);
}

static void serve_one(const struct webhook_endpoint *ep,
                      struct maas_inventory *inv,
                      const struct webhooks_inventory_source *src,
                      struct decode_budget *budget,
                      const struct http_request *hreq,
                      struct http_response *hresp)
{
        struct admission_request req = { .op = ADMISSION_OP_INVALID };
        struct admission_response resp = { .allowed = true };
        struct admission_scan scan;
        size_t taken = 0;
        char *err = NULL;

        arena_scope_begin(); /* every cJSON tree of this request is freed before the end */
        if (admission_request_scan(hreq->body, hreq->body_len, &scan, &err) < 0) {
                bad_request(hresp, err);
                goto out;
        }
        if (decode_budget_take(budget, scan.tree_bytes) < 0) {
                too_busy(hresp);
                goto out;
        }
        taken = scan.tree_bytes;
        if (admission_request_decode_scanned(hreq->body, &scan, &req, &err) < 0 ||
            !kind_matches(ep, &req, &err)) {
                bad_request(hresp, err);
                goto out;
        }
        if (ep->mutating)
                webhook_default(ep->kind, &req, &resp);
        else
                validate_routed(ep, inv, src, &req, &resp);
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
        trim_after(hreq->body_len, taken);
        if (taken)
                decode_budget_give(budget, taken);
}

static void serve(void *ud, const struct http_request *hreq, struct http_response *hresp)
{
        (void)pthread_once(&shared_budget_once, shared_budget_init);
        serve_one(ud, NULL, NULL, &shared_budget, hreq, hresp);
}

static void serve_routed(void *ud, const struct http_request *hreq, struct http_response *hresp)
{
        const struct webhook_route *wr = ud;

        serve_one(wr->ep, wr->inv, wr->source, wr->budget, hreq, hresp);
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

static pthread_once_t mmap_threshold_once = PTHREAD_ONCE_INIT;

/* Allocations of WEBHOOKS_TRIM_BYTES or more (request bodies, large trees' strings) are
 * mapped and unmapped by malloc, so they go back to the system the moment they are freed.
 * Without a fixed threshold glibc raises it to the largest block freed so far (up to
 * 32 MiB), and every later body of that size stays in the heap after its request. */
static void mmap_threshold_init(void)
{
#ifdef __GLIBC__
        (void)mallopt(M_MMAP_THRESHOLD, (int)WEBHOOKS_TRIM_BYTES);
#endif
}

int webhooks_new_opts(const struct webhooks_opts *o, struct webhooks **ret)
{
        struct webhooks *w = xcalloc(1, sizeof(*w));

        (void)pthread_once(&mmap_threshold_once, mmap_threshold_init);
        decode_budget_init(&w->budget,
                           o->decode_budget ? o->decode_budget : WEBHOOKS_DECODE_BUDGET_DEFAULT,
                           o->decode_wait_ms ? o->decode_wait_ms : WEBHOOKS_DECODE_WAIT_MS_DEFAULT);
        if (o->metrics) {
                struct metric_family *f;
                int r = metrics_counter(o->metrics, "capmaas_webhook_decode_refused_total",
                                        "AdmissionReviews answered 429 because the decode "
                                        "budget stayed spent for the whole wait.",
                                        NULL, &f);

                if (r < 0) {
                        webhooks_free(w);
                        return r;
                }
                w->budget.refused_metric = metric_series(f, NULL);
        }
        for (size_t i = 0; i < webhook_endpoints_n; i++)
                w->routes[i] = (struct webhook_route){ .ep = &webhook_endpoints[i],
                                                       .inv = o->inv,
                                                       .source = o->source,
                                                       .budget = &w->budget };
        *ret = w;
        return CM_OK;
}

int webhooks_new(struct maas_inventory *inv, struct webhooks **ret)
{
        return webhooks_new_opts(&(struct webhooks_opts){ .inv = inv }, ret);
}

struct webhooks *webhooks_free(struct webhooks *w)
{
        if (!w)
                return NULL;
        decode_budget_destroy(&w->budget);
        free(w);
        return NULL;
}

int webhooks_budget_take(struct webhooks *w, size_t bytes)
{
        return decode_budget_take(&w->budget, bytes);
}

void webhooks_budget_give(struct webhooks *w, size_t bytes)
{
        decode_budget_give(&w->budget, bytes);
}

unsigned webhooks_budget_waiters(struct webhooks *w)
{
        return atomic_load(&w->budget.waiters);
}

unsigned long webhooks_budget_refused(struct webhooks *w)
{
        return atomic_load(&w->budget.refused);
}

int webhooks_register_with(struct webhooks *w, struct router *r)
{
        return add_routes(r, serve_routed, route_ud, w);
}
