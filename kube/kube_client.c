/*
 * kube_client: REST verbs against the Kubernetes API over the libcurl transport. One
 * client per thread (it owns its transport); the config and the rate limiter are borrowed.
 * A request is: take a limiter token, refresh the bearer token from its file if the file
 * changed, send, and map a non-2xx Status to an enum cm_err plus a struct kube_error.
 * Reads are retried on transport errors, 429 and 5xx; writes only on 429 + Retry-After.
 */
#include "kube_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backoff.h"
#include "buf.h"
#include "err.h"
#include "http_transport.h"
#include "json.h"
#include "kube_priv.h"
#include "token_bucket.h"
#include "xalloc.h"

#define TOKEN_MAX        (64u * 1024u)
#define RETRY_AFTER_MAX  10000u
#define DEFAULT_PAGE     500u
#define DEFAULT_MAX_BODY (64u * 1024u * 1024u)

const struct kube_resource KUBE_RES_NAMESPACES = { "", "v1", "namespaces", "Namespace", false };
const struct kube_resource KUBE_RES_SECRETS = { "", "v1", "secrets", "Secret", true };
const struct kube_resource KUBE_RES_CONFIGMAPS = { "", "v1", "configmaps", "ConfigMap", true };
const struct kube_resource KUBE_RES_EVENTS = { "", "v1", "events", "Event", true };
const struct kube_resource KUBE_RES_NODES = { "", "v1", "nodes", "Node", false };
const struct kube_resource KUBE_RES_LEASES = { "coordination.k8s.io", "v1", "leases", "Lease",
                                               true };
const struct kube_resource KUBE_RES_CRDS = { "apiextensions.k8s.io", "v1",
                                             "customresourcedefinitions",
                                             "CustomResourceDefinition", false };
const struct kube_resource KUBE_RES_CLUSTERS = { "cluster.x-k8s.io", "v1beta1", "clusters",
                                                 "Cluster", true };
const struct kube_resource KUBE_RES_MACHINES = { "cluster.x-k8s.io", "v1beta1", "machines",
                                                 "Machine", true };
const struct kube_resource KUBE_RES_MAASCLUSTERS = { "infrastructure.cluster.x-k8s.io", "v1beta1",
                                                     "maasclusters", "MaasCluster", true };
const struct kube_resource KUBE_RES_MAASMACHINES = { "infrastructure.cluster.x-k8s.io", "v1beta1",
                                                     "maasmachines", "MaasMachine", true };
const struct kube_resource KUBE_RES_MAASMACHINETEMPLATES = { "infrastructure.cluster.x-k8s.io",
                                                             "v1beta1", "maasmachinetemplates",
                                                             "MaasMachineTemplate", true };
const struct kube_resource KUBE_RES_MAASCLUSTERTEMPLATES = { "infrastructure.cluster.x-k8s.io",
                                                             "v1beta1", "maasclustertemplates",
                                                             "MaasClusterTemplate", true };
const struct kube_resource KUBE_RES_MAASREMEDIATIONS = { "infrastructure.cluster.x-k8s.io",
                                                         "v1beta1", "maasremediations",
                                                         "MaasRemediation", true };
const struct kube_resource KUBE_RES_MAASREMEDIATIONTEMPLATES = { "infrastructure.cluster.x-k8s.io",
                                                                 "v1beta1",
                                                                 "maasremediationtemplates",
                                                                 "MaasRemediationTemplate", true };

struct kube_client {
        const struct kube_config *cfg; /* borrowed */
        struct token_bucket *rl;       /* borrowed, may be NULL */
        struct http_transport *t;      /* owned unless borrowed */
        bool borrowed_transport;       /* t came from kube_client_opts.transport */
        uint32_t timeout_ms;
        size_t max_body;
        char *user_agent;    /* owned */
        char *field_manager; /* owned */
        unsigned max_retries;
        void (*sleep_ms)(void *arg, uint64_t ms);
        void *sleep_arg;
        char *token; /* owned: the bearer token in use */
        struct stat token_st;
        uint64_t rnd; /* xorshift state for jitter */
};

/* One request as the retry loop sees it. */
struct kube_req {
        const char *method;
        const char *url;
        const char *content_type; /* NULL = no body */
        const char *body;
        size_t body_len;
        bool idempotent;
};

/* --- errors --------------------------------------------------------------------------- */

static const struct {
        long code;
        int err;
} status_map[] = {
        { 400, CM_EINVAL },       { 401, CM_EUNAUTHORIZED }, { 403, CM_EFORBIDDEN },
        { 404, CM_ENOTFOUND },    { 409, CM_ECONFLICT },     { 410, CM_EGONE },
        { 415, CM_EUNSUPPORTED }, { 422, CM_EINVAL },        { 429, CM_ESERVER },
        { 504, CM_ETIMEDOUT },
};

int kube_err_from_status(long code, const char *reason)
{
        if (code == 409 && reason && strcmp(reason, "AlreadyExists") == 0)
                return CM_EEXIST;
        for (size_t i = 0; i < ARRAY_SIZE(status_map); i++)
                if (status_map[i].code == code)
                        return status_map[i].err;
        if (code >= 500)
                return CM_ESERVER;
        return code >= 200 && code < 300 ? 0 : CM_EINVAL;
}

void kube_error_set(struct kube_error *e, long code, const cJSON *status, const char *fallback)
{
        const char *reason = NULL, *msg = NULL;
        const cJSON *causes;

        if (!e)
                return;
        kube_error_release(e);
        e->http_status = code;
        if (cJSON_IsObject(status)) {
                reason = json_find_str(status, "reason", NULL);
                msg = json_find_str(status, "message", NULL);
                causes = cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(status, "details"), "causes");
                if (cJSON_IsArray(causes))
                        e->causes = cJSON_Duplicate(causes, true);
        }
        e->reason = reason ? xstrdup(reason) : NULL;
        msg = msg ? msg : fallback;
        e->message = msg ? xstrdup(msg) : NULL;
}

void kube_error_release(struct kube_error *e)
{
        if (!e)
                return;
        free(e->reason);
        free(e->message);
        cJSON_Delete(e->causes);
        *e = (struct kube_error){ 0 };
}

/* Maps a non-2xx response: the Status in the body when there is one. */
static int fail_from_response(const struct transport_response *resp, struct kube_error *e)
{
        cJSON *st = NULL;
        const char *reason = NULL;
        char fallback[64];
        int r;

        if (resp->body_len > 0 && json_parse(resp->body, resp->body_len, &st) == 0 &&
            cJSON_IsObject(st))
                reason = json_find_str(st, "reason", NULL);
        snprintf(fallback, sizeof(fallback), "HTTP %ld", resp->status);
        kube_error_set(e, resp->status, st, fallback);
        r = kube_err_from_status(resp->status, reason);
        cJSON_Delete(st);
        return r;
}

/* --- URLs ----------------------------------------------------------------------------- */

void kube_must(int r)
{
        if (r < 0)
                abort();
}

static void url_escape(struct buf *b, const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        char enc[3] = { '%', 0, 0 };

        for (; *s; s++) {
                unsigned char ch = (unsigned char)*s;
                bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                             (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' ||
                             ch == '~';

                if (plain) {
                        kube_must(buf_append(b, s, 1));
                        continue;
                }
                enc[1] = hex[ch >> 4];
                enc[2] = hex[ch & 15];
                kube_must(buf_append(b, enc, 3));
        }
}

void kube_query_add(struct buf *q, const char *key, const char *value)
{
        if (q->len > 0)
                kube_must(buf_append(q, "&", 1));
        kube_must(buf_append_str(q, key));
        kube_must(buf_append(q, "=", 1));
        url_escape(q, value);
}

char *kube_server_url(const struct kube_client *c, const char *path)
{
        return xasprintf("%s%s", c->cfg->server, path);
}

char *kube_url(const struct kube_client *c,
               const struct kube_resource *r,
               const char *ns,
               const char *name,
               const char *sub,
               const char *query)
{
        struct buf b;

        buf_init(&b, STR_MAX);
        kube_must(buf_append_str(&b, c->cfg->server));
        if (r->group[0])
                kube_must(buf_printf(&b, "/apis/%s/%s", r->group, r->version));
        else
                kube_must(buf_printf(&b, "/api/%s", r->version));
        if (r->namespaced && ns && ns[0]) {
                kube_must(buf_append_str(&b, "/namespaces/"));
                url_escape(&b, ns);
        }
        kube_must(buf_printf(&b, "/%s", r->plural));
        if (name) {
                kube_must(buf_append(&b, "/", 1));
                url_escape(&b, name);
        }
        if (name && sub && sub[0])
                kube_must(buf_printf(&b, "/%s", sub));
        if (query && query[0])
                kube_must(buf_printf(&b, "?%s", query));
        return buf_take(&b, NULL);
}

/* --- authentication ------------------------------------------------------------------- */

static char *read_token(int fd)
{
        struct buf b;
        char chunk[4096];
        ssize_t n;
        size_t len;

        buf_init(&b, TOKEN_MAX);
        while ((n = read(fd, chunk, sizeof(chunk))) > 0)
                if (buf_append(&b, chunk, (size_t)n) < 0)
                        break;
        len = b.len;
        while (len > 0 && (b.data[len - 1] == '\n' || b.data[len - 1] == '\r' ||
                           b.data[len - 1] == ' ' || b.data[len - 1] == '\t'))
                len--;
        if (n < 0 || len == 0) {
                buf_release(&b);
                return NULL;
        }
        b.data[len] = '\0';
        return buf_take(&b, NULL);
}

static bool same_file_state(const struct stat *a, const struct stat *b)
{
        return a->st_ino == b->st_ino && a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Re-reads token_file when it changed; on any failure the previous token stays in use. */
static void refresh_token(struct kube_client *c)
{
        struct stat st;
        char *tok;
        int fd;

        if (!c->cfg->token_file)
                return;
        fd = open(c->cfg->token_file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        if (fstat(fd, &st) == 0 && !(c->token && same_file_state(&st, &c->token_st))) {
                tok = read_token(fd);
                if (tok) {
                        free(c->token);
                        c->token = tok;
                        c->token_st = st;
                }
        }
        close(fd);
}

/* --- lifecycle ------------------------------------------------------------------------ */

int kube_client_new(const struct kube_client_opts *o, struct kube_client **ret)
{
        const struct kube_config *cfg = o->config;
        struct kube_client *c;
        int r;

        if (!cfg || !cfg->server || !cfg->server[0])
                return CM_EINVAL;
        c = xcalloc(1, sizeof(*c));
        c->cfg = cfg;
        c->rl = o->limiter;
        c->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
        c->max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY;
        c->user_agent = xstrdup(o->user_agent ? o->user_agent : "capmaas/0.1");
        c->field_manager = xstrdup(o->field_manager ? o->field_manager : "capmaas");
        c->max_retries = o->max_retries ? o->max_retries : 3;
        c->sleep_ms = o->sleep_ms;
        c->sleep_arg = o->sleep_arg;
        c->rnd = (uint64_t)(uintptr_t)c ^ ((uint64_t)time(NULL) << 20) ^ 0x9e3779b97f4a7c15u;
        c->token = cfg->token ? xstrdup(cfg->token) : NULL;
        if (o->transport) {
                c->t = o->transport;
                c->borrowed_transport = true;
                *ret = c;
                return 0;
        }
        r = http_transport_curl_new(
                &(struct http_transport_opts){ .ca_file = cfg->ca_file,
                                               .client_cert_file = cfg->client_cert_file,
                                               .client_key_file = cfg->client_key_file,
                                               .insecure_skip_verify = cfg->insecure_skip_verify,
                                               .timeout_ms = c->timeout_ms,
                                               .max_body = c->max_body },
                &c->t);
        if (r < 0) {
                kube_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

struct kube_client *kube_client_free(struct kube_client *c)
{
        if (!c)
                return NULL;
        if (!c->borrowed_transport)
                http_transport_free(c->t);
        free(c->user_agent);
        free(c->field_manager);
        free(c->token);
        free(c);
        return NULL;
}

/* --- one exchange --------------------------------------------------------------------- */

static void do_sleep(struct kube_client *c, uint64_t ms)
{
        struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
                               .tv_nsec = (long)(ms % 1000) * 1000000L };

        if (c->sleep_ms) {
                c->sleep_ms(c->sleep_arg, ms);
                return;
        }
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
}

/* Sends once, with fresh headers. s != NULL streams. */
static int send_once(struct kube_client *c,
                     const struct kube_req *q,
                     const struct transport_stream *s,
                     uint32_t timeout_ms,
                     struct transport_response *resp)
{
        char *auth = NULL, *ua = xasprintf("User-Agent: %s", c->user_agent);
        char *ctype = q->content_type ? xasprintf("Content-Type: %s", q->content_type) : NULL;
        const char *hdrs[4];
        struct transport_request req = { .method = q->method,
                                         .url = q->url,
                                         .headers = hdrs,
                                         .body = q->body,
                                         .body_len = q->body_len,
                                         .timeout_ms = timeout_ms };
        size_t n = 0;
        int r;

        if (c->rl)
                (void)token_bucket_wait(c->rl);
        refresh_token(c);
        if (c->token)
                auth = xasprintf("Authorization: Bearer %s", c->token);
        hdrs[n++] = "Accept: application/json";
        hdrs[n++] = ua;
        if (auth)
                hdrs[n++] = auth;
        if (ctype)
                hdrs[n++] = ctype;
        req.n_headers = n;
        r = s ? c->t->stream(c->t, &req, s, resp) : c->t->send(c->t, &req, resp);
        free(auth);
        free(ua);
        free(ctype);
        return r;
}

static uint64_t next_rnd(struct kube_client *c)
{
        c->rnd ^= c->rnd << 13;
        c->rnd ^= c->rnd >> 7;
        c->rnd ^= c->rnd << 17;
        return c->rnd;
}

/* Retry-After in seconds: the header, else the Status's details.retryAfterSeconds; -1. */
static long retry_after_s(const struct transport_response *resp)
{
        cJSON *st = NULL;
        const cJSON *v;
        long s = -1;

        if (resp->retry_after_s >= 0)
                return resp->retry_after_s;
        if (json_parse(resp->body, resp->body_len, &st) < 0)
                return -1;
        v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "details"),
                                             "retryAfterSeconds");
        if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 3600)
                s = (long)v->valuedouble;
        cJSON_Delete(st);
        return s;
}

/* How long to wait before the next attempt, or -1 when this outcome is final. */
static int64_t retry_delay(struct kube_client *c,
                           const struct kube_req *q,
                           int r,
                           const struct transport_response *resp,
                           unsigned attempt)
{
        static const struct backoff_policy policy = { .base_ms = 100, .max_ms = 2000 };
        uint64_t d = backoff_jittered_ms(&policy, attempt, next_rnd(c));
        long ra;

        if (attempt >= c->max_retries)
                return -1;
        if (r < 0)
                return q->idempotent && r != CM_ETOOBIG ? (int64_t)d : -1;
        if (resp->status == 429 && (ra = retry_after_s(resp)) >= 0) {
                d = (uint64_t)ra * 1000u;
                return (int64_t)(d > RETRY_AFTER_MAX ? RETRY_AFTER_MAX : d);
        }
        if (q->idempotent && (resp->status == 429 || resp->status >= 500))
                return (int64_t)d;
        return -1;
}

/* Sends with retries. 0 with *resp holding a 2xx response, or an error (e filled). */
static int exchange(struct kube_client *c,
                    const struct kube_req *q,
                    struct transport_response *resp,
                    struct kube_error *e)
{
        int64_t delay;
        int r;

        for (unsigned attempt = 0;; attempt++) {
                *resp = (struct transport_response){ .retry_after_s = -1 };
                r = send_once(c, q, NULL, c->timeout_ms, resp);
                delay = retry_delay(c, q, r, resp, attempt);
                if (delay < 0)
                        break;
                transport_response_release(resp);
                do_sleep(c, (uint64_t)delay);
        }
        if (r < 0) {
                kube_error_set(e, 0, NULL, c->t->error);
                return r;
        }
        if (resp->status >= 200 && resp->status < 300)
                return 0;
        r = fail_from_response(resp, e);
        transport_response_release(resp);
        return r;
}

/* exchange() and parse the 2xx body into *ret (when ret is non-NULL). */
static int call_json(struct kube_client *c,
                     const struct kube_req *q,
                     cJSON **ret,
                     struct kube_error *e)
{
        struct transport_response resp = { .retry_after_s = -1 };
        cJSON *obj = NULL;
        int r;

        r = exchange(c, q, &resp, e);
        if (r < 0)
                return r;
        if (ret) {
                r = json_parse(resp.body, resp.body_len, &obj);
                if (r < 0) {
                        kube_error_set(e, resp.status, NULL, "malformed JSON in the response");
                } else {
                        *ret = obj;
                }
        }
        transport_response_release(&resp);
        return r;
}

int kube_stream_get(struct kube_client *c,
                    const char *url,
                    const struct transport_stream *s,
                    uint32_t timeout_ms,
                    struct kube_error *e)
{
        struct transport_response resp = { .retry_after_s = -1 };
        const struct kube_req q = { .method = "GET", .url = url, .idempotent = true };
        int r;

        if (!c->t->stream)
                return CM_EUNSUPPORTED;
        r = send_once(c, &q, s, timeout_ms, &resp);
        if (r < 0) {
                kube_error_set(e, 0, NULL, c->t->error);
                return r;
        }
        if (resp.status < 200 || resp.status >= 300)
                r = fail_from_response(&resp, e);
        transport_response_release(&resp);
        return r;
}

/* --- verbs ---------------------------------------------------------------------------- */

int kube_get(struct kube_client *c,
             const struct kube_resource *r,
             const char *ns,
             const char *name,
             cJSON **ret,
             struct kube_error *e)
{
        char *url = kube_url(c, r, ns, name, NULL, NULL);
        int err;

        kube_error_release(e);
        err = call_json(c, &(struct kube_req){ .method = "GET", .url = url, .idempotent = true },
                        ret, e);
        free(url);
        return err;
}

static char *list_query(const struct kube_list_opts *o, const char *cont)
{
        struct buf q;
        char lim[24];

        buf_init(&q, STR_MAX);
        snprintf(lim, sizeof(lim), "%u", o && o->page_size ? o->page_size : DEFAULT_PAGE);
        kube_query_add(&q, "limit", lim);
        if (o && o->label_selector && o->label_selector[0])
                kube_query_add(&q, "labelSelector", o->label_selector);
        if (o && o->field_selector && o->field_selector[0])
                kube_query_add(&q, "fieldSelector", o->field_selector);
        if (cont)
                kube_query_add(&q, "continue", cont);
        return buf_take(&q, NULL);
}

/* The page's continue token as a new string, or NULL on the last page. */
static char *page_continue(const cJSON *page)
{
        const char *cont =
                json_find_str(cJSON_GetObjectItemCaseSensitive(page, "metadata"), "continue", NULL);

        return cont && cont[0] ? xstrdup(cont) : NULL;
}

/* One full pass over the pages, each handed to on_page as it arrives. */
static int page_pass(struct kube_client *c,
                     const struct kube_resource *r,
                     const char *ns,
                     const struct kube_list_opts *o,
                     bool restart,
                     kube_page_fn *on_page,
                     void *arg,
                     struct kube_error *e)
{
        char *cont = NULL, *query, *url;
        bool first = true;
        cJSON *page;
        int err;

        do {
                query = list_query(o, cont);
                url = kube_url(c, r, ns, NULL, NULL, query);
                page = NULL;
                err = call_json(
                        c, &(struct kube_req){ .method = "GET", .url = url, .idempotent = true },
                        &page, e);
                free(query);
                free(url);
                free(cont);
                cont = NULL;
                if (err == 0 && !cJSON_IsObject(page))
                        err = CM_EPARSE;
                if (err < 0) {
                        cJSON_Delete(page);
                        break;
                }
                cont = page_continue(page);
                err = on_page(arg, page, first, first && restart);
                first = false;
        } while (err == 0 && cont);
        free(cont);
        return err;
}

int kube_list_pages(struct kube_client *c,
                    const struct kube_resource *r,
                    const char *ns,
                    const struct kube_list_opts *o,
                    kube_page_fn *on_page,
                    void *arg,
                    struct kube_error *e)
{
        int err;

        kube_error_release(e);
        err = page_pass(c, r, ns, o, false, on_page, arg, e);
        if (err == CM_EGONE) { /* an expired continue token: start over once */
                kube_error_release(e);
                err = page_pass(c, r, ns, o, true, on_page, arg, e);
        }
        return err;
}

/* kube_list's accumulator: the first page, with every later page's items moved into it. */
static int merge_page(void *arg, cJSON *page, bool first, bool restart)
{
        cJSON **acc = arg;
        cJSON *items, *pitems, *it, *md;

        (void)restart;
        if (first) {
                cJSON_Delete(*acc);
                *acc = page;
                md = cJSON_GetObjectItemCaseSensitive(page, "metadata");
                cJSON_DeleteItemFromObjectCaseSensitive(md, "continue");
                cJSON_DeleteItemFromObjectCaseSensitive(md, "remainingItemCount");
                if (!cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(page, "items"))) {
                        cJSON_DeleteItemFromObjectCaseSensitive(page, "items");
                        (void)cJSON_AddArrayToObject(page, "items");
                }
                return 0;
        }
        items = cJSON_GetObjectItemCaseSensitive(*acc, "items");
        pitems = cJSON_GetObjectItemCaseSensitive(page, "items");
        while (cJSON_IsArray(pitems) && (it = cJSON_DetachItemFromArray(pitems, 0)))
                cJSON_AddItemToArray(items, it);
        cJSON_Delete(page);
        return 0;
}

int kube_list(struct kube_client *c,
              const struct kube_resource *r,
              const char *ns,
              const struct kube_list_opts *o,
              cJSON **ret,
              struct kube_error *e)
{
        cJSON *acc = NULL;
        int err = kube_list_pages(c, r, ns, o, merge_page, &acc, e);

        if (err == 0)
                *ret = acc;
        else
                cJSON_Delete(acc);
        return err;
}

/* A write with a JSON body built from obj. */
static int write_obj(struct kube_client *c,
                     const char *method,
                     const char *url,
                     const cJSON *obj,
                     cJSON **ret,
                     struct kube_error *e)
{
        char *body = cJSON_PrintUnformatted(obj);
        int err;

        if (!body)
                return CM_EINVAL;
        err = call_json(c,
                        &(struct kube_req){ .method = method,
                                            .url = url,
                                            .content_type = "application/json",
                                            .body = body,
                                            .body_len = strlen(body) },
                        ret, e);
        cJSON_free(body);
        return err;
}

static char *manager_query(const struct kube_client *c, bool force)
{
        struct buf q;

        buf_init(&q, STR_MAX);
        kube_query_add(&q, "fieldManager", c->field_manager);
        if (force)
                kube_query_add(&q, "force", "true");
        return buf_take(&q, NULL);
}

int kube_create(struct kube_client *c,
                const struct kube_resource *r,
                const char *ns,
                const cJSON *obj,
                cJSON **ret,
                struct kube_error *e)
{
        char *query = manager_query(c, false);
        char *url = kube_url(c, r, ns, NULL, NULL, query);
        int err;

        kube_error_release(e);
        err = write_obj(c, "POST", url, obj, ret, e);
        free(query);
        free(url);
        return err;
}

int kube_update(struct kube_client *c,
                const struct kube_update_opts *o,
                const cJSON *obj,
                cJSON **ret,
                struct kube_error *e)
{
        char *query = manager_query(c, false);
        char *url = kube_url(c, o->resource, o->ns, o->name, o->subresource, query);
        int err;

        kube_error_release(e);
        err = write_obj(c, "PUT", url, obj, ret, e);
        free(query);
        free(url);
        return err;
}

static const char *const patch_types[] = {
        [KUBE_PATCH_MERGE] = "application/merge-patch+json",
        [KUBE_PATCH_JSON] = "application/json-patch+json",
        [KUBE_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
        [KUBE_PATCH_APPLY] = "application/apply-patch+yaml",
};

int kube_patch(struct kube_client *c,
               const struct kube_patch_opts *o,
               cJSON **ret,
               struct kube_error *e)
{
        char *query, *url;
        int err;

        kube_error_release(e);
        if (!o || (unsigned)o->type >= ARRAY_SIZE(patch_types) || !o->body)
                return CM_EINVAL;
        query = manager_query(c, o->type == KUBE_PATCH_APPLY);
        url = kube_url(c, o->resource, o->ns, o->name, o->subresource, query);
        err = call_json(c,
                        &(struct kube_req){ .method = "PATCH",
                                            .url = url,
                                            .content_type = patch_types[o->type],
                                            .body = o->body,
                                            .body_len = strlen(o->body) },
                        ret, e);
        free(query);
        free(url);
        return err;
}

static char *delete_body(const struct kube_delete_opts *o)
{
        cJSON *b = cJSON_CreateObject(), *pre;
        char *txt;

        cJSON_AddStringToObject(b, "kind", "DeleteOptions");
        cJSON_AddStringToObject(b, "apiVersion", "v1");
        if (o && o->propagation_policy)
                cJSON_AddStringToObject(b, "propagationPolicy", o->propagation_policy);
        if (o && o->grace_period_seconds >= 0)
                cJSON_AddNumberToObject(b, "gracePeriodSeconds", (double)o->grace_period_seconds);
        if (o && (o->precondition_uid || o->precondition_rv)) {
                pre = cJSON_AddObjectToObject(b, "preconditions");
                if (o->precondition_uid)
                        cJSON_AddStringToObject(pre, "uid", o->precondition_uid);
                if (o->precondition_rv)
                        cJSON_AddStringToObject(pre, "resourceVersion", o->precondition_rv);
        }
        txt = cJSON_PrintUnformatted(b);
        cJSON_Delete(b);
        return txt;
}

int kube_delete(struct kube_client *c,
                const struct kube_resource *r,
                const char *ns,
                const char *name,
                const struct kube_delete_opts *o,
                struct kube_error *e)
{
        char *url = kube_url(c, r, ns, name, NULL, NULL);
        char *body = delete_body(o);
        int err;

        kube_error_release(e);
        err = call_json(c,
                        &(struct kube_req){ .method = "DELETE",
                                            .url = url,
                                            .content_type = "application/json",
                                            .body = body,
                                            .body_len = strlen(body) },
                        NULL, e);
        cJSON_free(body);
        free(url);
        return err;
}

/* --- helpers -------------------------------------------------------------------------- */

const char *kube_meta_str(const cJSON *obj, const char *field)
{
        return json_find_str(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), field, NULL);
}

static const char *meta_map_str(const cJSON *obj, const char *map, const char *key)
{
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");

        return json_find_str(cJSON_GetObjectItemCaseSensitive(md, map), key, NULL);
}

const char *kube_label(const cJSON *obj, const char *key)
{
        return meta_map_str(obj, "labels", key);
}

const char *kube_annotation(const cJSON *obj, const char *key)
{
        return meta_map_str(obj, "annotations", key);
}
