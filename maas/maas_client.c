/*
 * maas_client: the MAAS 2.0 calls. Each call builds a `struct call` (method, URL, urlencoded
 * parameters, idempotency), runs it through maas_do() -- which signs every attempt with a
 * fresh OAuth nonce and timestamp, retries as maas_client.h describes, classifies errors
 * and parses the JSON body -- then decodes the result.
 *
 * Wire format follows gomaasapi/maas-client-go: GET parameters in the query; POST ops as
 * "?op=<name>" with the other parameters urlencoded in the body; PUT parameters in the body;
 * multi-valued parameters as repeated keys (each allocate tag separately, fixing the
 * reference's last-tag-only bug). Confined to the owning thread; never logs.
 */
#include "maas_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "base64.h"
#include "buf.h"
#include "err.h"
#include "json.h"
#include "maas_decode.h"
#include "maas_pods.h"
#include "token_bucket.h"
#include "xalloc.h"

#define FORM_MAX    (1024 * 1024)
#define MESSAGE_MAX 1024

struct maas_client {
        char *base_url;
        struct maas_credentials creds;
        struct http_transport *t;
        unsigned max_attempts;
        struct backoff_policy backoff;
        uint64_t max_retry_after_ms;
        uint32_t timeout_ms;
        struct token_bucket *budget; /* borrowed; NULL = unlimited */
        void (*sleep_ms)(void *ud, uint64_t ms);
        void *sleep_ud;
        void (*observe)(void *ud, int err);
        void *observe_ud;
        uint64_t rng;
};

struct call {
        const char *method;
        char *url;       /* owned; includes the query */
        struct buf form; /* urlencoded body (POST, PUT) */
        bool idempotent;
        bool allocate; /* a 409 means "no machine matches" */
};

/* --- configuration ------------------------------------------------------------------------ */

int maas_config_parse(const char *endpoint,
                      const char *api_key,
                      struct maas_config *ret,
                      char **ret_err)
{
        struct maas_config c = { 0 };
        int r;

        r = maas_endpoint_parse(endpoint, &c.base_url, ret_err);
        if (r < 0)
                return r;
        r = maas_credentials_parse(api_key, &c.creds, ret_err);
        if (r < 0) {
                free(c.base_url);
                return r;
        }
        *ret = c;
        return 0;
}

void maas_config_release(struct maas_config *c)
{
        free(c->base_url);
        maas_credentials_release(&c->creds);
        *c = (struct maas_config){ 0 };
}

static void default_sleep(void *ud, uint64_t ms)
{
        struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
                               .tv_nsec = (long)(ms % 1000) * 1000000L };

        (void)ud;
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

int maas_client_new(const struct maas_client_opts *o, struct maas_client **ret)
{
        struct maas_client *mc;

        if (!o->cfg || !o->cfg->base_url || !o->cfg->creds.token_secret || !o->transport)
                return CM_EINVAL;
        mc = xcalloc(1, sizeof(*mc));
        mc->base_url = xstrdup(o->cfg->base_url);
        mc->creds = (struct maas_credentials){
                .consumer_key = xstrdup(o->cfg->creds.consumer_key),
                .token_key = xstrdup(o->cfg->creds.token_key),
                .token_secret = xstrdup(o->cfg->creds.token_secret),
        };
        mc->t = o->transport;
        mc->max_attempts = o->max_attempts ? o->max_attempts : 4;
        mc->backoff = o->backoff.base_ms
                              ? o->backoff
                              : (struct backoff_policy){ .base_ms = 200, .max_ms = 5000 };
        mc->max_retry_after_ms = o->max_retry_after_ms ? o->max_retry_after_ms : 10000;
        mc->timeout_ms = o->timeout_ms;
        mc->budget = o->budget;
        mc->observe = o->observe;
        mc->observe_ud = o->observe_ud;
        mc->sleep_ms = o->sleep_ms ? o->sleep_ms : default_sleep;
        mc->sleep_ud = o->sleep_ud;
        if (getrandom(&mc->rng, sizeof(mc->rng), 0) != (ssize_t)sizeof(mc->rng))
                mc->rng = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)mc;
        *ret = mc;
        return 0;
}

struct maas_client *maas_client_free(struct maas_client *mc)
{
        if (!mc)
                return NULL;
        free(mc->base_url);
        maas_credentials_release(&mc->creds);
        free(mc);
        return NULL;
}

/* --- errors ------------------------------------------------------------------------------- */

void maas_error_release(struct maas_error *e)
{
        if (!e)
                return;
        free(e->message);
        cJSON_Delete(e->fields);
        *e = (struct maas_error){ 0 };
}

const char *maas_error_class_name(enum maas_error_class cls)
{
        static const char *const names[] = {
                [MAAS_ERR_NONE] = "none",
                [MAAS_ERR_NOT_FOUND] = "not found",
                [MAAS_ERR_NO_MATCH] = "no machine matches",
                [MAAS_ERR_CONFLICT] = "state conflict",
                [MAAS_ERR_UNAUTHORIZED] = "unauthorized",
                [MAAS_ERR_FORBIDDEN] = "forbidden",
                [MAAS_ERR_VALIDATION] = "validation",
                [MAAS_ERR_TRANSIENT] = "transient",
                [MAAS_ERR_PROTOCOL] = "protocol",
        };

        return (unsigned)cls < ARRAY_SIZE(names) && names[cls] ? names[cls] : "unknown";
}

const char *maas_strerror(int err)
{
        return err == MAAS_ENOMATCH ? "no machine matches the constraints" : cm_strerror(err);
}

static const struct {
        long status;
        enum maas_error_class cls;
        int code;
} status_map[] = {
        { 400, MAAS_ERR_VALIDATION, CM_EINVAL },
        { 401, MAAS_ERR_UNAUTHORIZED, CM_EUNAUTHORIZED },
        { 403, MAAS_ERR_FORBIDDEN, CM_EFORBIDDEN },
        { 404, MAAS_ERR_NOT_FOUND, CM_ENOTFOUND },
        { 409, MAAS_ERR_CONFLICT, CM_ECONFLICT },
        { 410, MAAS_ERR_PROTOCOL, CM_EUNSUPPORTED },
        { 429, MAAS_ERR_TRANSIENT, CM_ESERVER },
};

/* "zone: No such zone: 'x'." from the first entry of a 400 field map. */
static char *field_message(const cJSON *fields)
{
        const cJSON *first = fields->child;
        const cJSON *msg = cJSON_IsArray(first) ? first->child : first;

        if (!first || !cJSON_IsString(msg))
                return NULL;
        return xasprintf("%s: %s", first->string, msg->valuestring);
}

static int classify(const struct call *c,
                    const struct transport_response *resp,
                    struct maas_error *err)
{
        enum maas_error_class cls = resp->status >= 500 ? MAAS_ERR_TRANSIENT : MAAS_ERR_PROTOCOL;
        int code = resp->status >= 500 ? CM_ESERVER : CM_EIO;
        cJSON *fields = NULL;

        for (size_t i = 0; i < ARRAY_SIZE(status_map); i++)
                if (status_map[i].status == resp->status) {
                        cls = status_map[i].cls;
                        code = status_map[i].code;
                }
        if (resp->status == 409 && c->allocate) {
                cls = MAAS_ERR_NO_MATCH;
                code = MAAS_ENOMATCH;
        }
        if (!err)
                return code;
        if (resp->status == 400) {
                fields = cJSON_ParseWithLengthOpts(resp->body, resp->body_len, NULL, false);
                if (!cJSON_IsObject(fields)) {
                        cJSON_Delete(fields);
                        fields = NULL;
                }
        }
        err->http_status = resp->status;
        err->cls = cls;
        err->fields = fields;
        err->message = fields ? field_message(fields) : NULL;
        if (!err->message)
                err->message = xstrndup(resp->body, resp->body_len < MESSAGE_MAX ? resp->body_len
                                                                                 : MESSAGE_MAX);
        return code;
}

/* Blanks every part of the key in s (MAAS's 401 text echoes the token key: "Invalid access
 * token: ..."), so an error message can go into a condition or an event as it is. */
static void scrub_key(const struct maas_client *mc, char *s)
{
        const char *parts[] = { mc->creds.consumer_key, mc->creds.token_key,
                                mc->creds.token_secret };

        for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
                size_t n = parts[i] ? strlen(parts[i]) : 0;
                char *hit;

                while (n && (hit = strstr(s, parts[i])))
                        memset(hit, '*', n);
        }
}

static void transport_error(const struct maas_client *mc, struct maas_error *err)
{
        if (!err)
                return;
        err->http_status = 0;
        err->cls = MAAS_ERR_TRANSIENT;
        err->message = xstrdup(mc->t->error[0] ? mc->t->error : "transport error");
}

/* --- the request loop ------------------------------------------------------------------------ */

/* Where a 2xx body goes as it arrives, when the transport streams (run_machines): reset()
 * before every attempt, so a retry starts from nothing. NULL = buffer the body. */
struct sink {
        transport_chunk_fn on_chunk;
        void (*reset)(void *arg);
        void *arg;
};

static bool streams(const struct maas_client *mc, const struct sink *sk)
{
        return sk && mc->t->stream;
}

static int send_once(struct maas_client *mc,
                     const struct call *c,
                     const struct sink *sk,
                     struct transport_response *resp)
{
        char nonce[33];
        char *auth;
        const char *hdrs[3];
        struct transport_request req = {
                .method = c->method,
                .url = c->url,
                .headers = hdrs,
                .n_headers = 2,
                .timeout_ms = mc->timeout_ms,
        };
        int r;

        maas_auth_nonce(nonce);
        auth = maas_auth_header(&mc->creds, (int64_t)time(NULL), nonce);
        hdrs[0] = auth;
        hdrs[1] = "Accept: application/json";
        if (strcmp(c->method, "POST") == 0 || strcmp(c->method, "PUT") == 0) {
                hdrs[2] = "Content-Type: application/x-www-form-urlencoded";
                req.n_headers = 3;
                req.body = c->form.data ? c->form.data : "";
                req.body_len = c->form.len;
        }
        if (streams(mc, sk)) {
                sk->reset(sk->arg);
                r = mc->t->stream(
                        mc->t, &req,
                        &(struct transport_stream){ .on_chunk = sk->on_chunk, .arg = sk->arg },
                        resp);
        } else {
                r = mc->t->send(mc->t, &req, resp);
        }
        explicit_bzero(auth, strlen(auth));
        free(auth);
        return r;
}

static uint64_t next_rand(struct maas_client *mc)
{
        mc->rng ^= mc->rng << 13;
        mc->rng ^= mc->rng >> 7;
        mc->rng ^= mc->rng << 17;
        return mc->rng;
}

/* A "slow down" answer (429 or 503 with Retry-After: MAAS, or the proxy in front of it, did
 * not act on the request): the wait it asks for, capped; 0 for any other answer. */
static uint64_t slow_down_ms(const struct maas_client *mc,
                             int r,
                             const struct transport_response *resp)
{
        uint64_t d;

        if (r != 0 || (resp->status != 429 && resp->status != 503) || resp->retry_after_s < 0)
                return 0;
        d = (uint64_t)resp->retry_after_s * 1000;
        if (d == 0)
                d = 1; /* "Retry-After: 0" still means this answer was a refusal */
        return d < mc->max_retry_after_ms ? d : mc->max_retry_after_ms;
}

/* The delay before the next attempt, or UINT64_MAX when this outcome is final. */
static uint64_t retry_delay(struct maas_client *mc,
                            const struct call *c,
                            int r,
                            const struct transport_response *resp,
                            unsigned attempt)
{
        uint64_t slow = slow_down_ms(mc, r, resp);

        if (attempt + 1 >= mc->max_attempts)
                return UINT64_MAX;
        if (slow)
                return slow;
        if (!c->idempotent || (r == 0 && resp->status < 500 && resp->status != 429) ||
            r == CM_ETOOBIG)
                return UINT64_MAX;
        return backoff_jittered_ms(&mc->backoff, attempt, next_rand(mc));
}

/* Waits for the process-wide budget's token before a request goes out. */
static void take_token(struct maas_client *mc)
{
        uint64_t ms = token_bucket_reserve(mc->budget);

        if (ms)
                mc->sleep_ms(mc->sleep_ud, ms);
}

static int parse_body(const struct transport_response *resp,
                      cJSON **ret_doc,
                      struct maas_error *err)
{
        cJSON *doc;

        *ret_doc = NULL;
        if (resp->status == 204 || resp->body_len == 0)
                return 0;
        doc = cJSON_ParseWithLengthOpts(resp->body, resp->body_len, NULL, false);
        if (!doc) {
                if (err) {
                        err->http_status = resp->status;
                        err->cls = MAAS_ERR_PROTOCOL;
                        err->message = xstrdup("MAAS answered with malformed JSON");
                }
                return CM_EPARSE;
        }
        *ret_doc = doc;
        return 0;
}

/* Sends c (retrying as its idempotency allows) and classifies the answer. On a 2xx the
 * response moves to *ret (the caller releases it); otherwise it is released here. With a
 * sink and a transport that streams, a 2xx body went to the sink (ret->body is "") and an
 * error body is buffered (capped) as usual. */
static int maas_do_into(struct maas_client *mc,
                        const struct call *c,
                        const struct sink *sk,
                        struct transport_response *ret,
                        struct maas_error *err)
{
        struct transport_response resp = { .retry_after_s = -1 };
        unsigned attempt = 0;
        uint64_t delay;
        int r;

        if (err)
                maas_error_release(err);
        for (;;) {
                transport_response_release(&resp);
                take_token(mc);
                r = send_once(mc, c, sk, &resp);
                /* Every client of the process waits out a slow-down, not just this one. */
                token_bucket_hold(mc->budget, slow_down_ms(mc, r, &resp));
                delay = retry_delay(mc, c, r, &resp, attempt);
                if (delay == UINT64_MAX)
                        break;
                mc->sleep_ms(mc->sleep_ud, delay);
                attempt++;
        }
        if (err)
                err->attempts = attempt + 1;
        if (r < 0)
                transport_error(mc, err);
        else if (resp.status < 200 || resp.status > 299)
                r = classify(c, &resp, err);
        if (err && err->message)
                scrub_key(mc, err->message);
        if (mc->observe)
                mc->observe(mc->observe_ud, r);
        if (r == 0) {
                *ret = resp;
                return 0;
        }
        transport_response_release(&resp);
        return r;
}

static int maas_do(struct maas_client *mc,
                   const struct call *c,
                   struct transport_response *ret,
                   struct maas_error *err)
{
        return maas_do_into(mc, c, NULL, ret, err);
}

/* --- call building -----------------------------------------------------------------------------
 */

static void form_add(struct call *c, const char *k, const char *v)
{
        char *ek = maas_percent_encode(k);
        char *ev = maas_percent_encode(v);

        if (buf_printf(&c->form, "%s%s=%s", c->form.len ? "&" : "", ek, ev) < 0)
                abort(); /* FORM_MAX is far above anything we send */
        free(ek);
        free(ev);
}

static void form_add_all(struct call *c, const char *k, const char *const *v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                form_add(c, k, v[i]);
}

static void form_add_bool(struct call *c, const char *k, bool v)
{
        form_add(c, k, v ? "true" : "false");
}

/* path is relative to the API root; op (may be NULL) goes into the query. */
static void call_init(struct call *c,
                      struct maas_client *mc,
                      const char *method,
                      const char *path,
                      const char *op,
                      bool idempotent)
{
        *c = (struct call){ .method = method, .idempotent = idempotent };
        buf_init(&c->form, FORM_MAX);
        c->url = op ? xasprintf("%s%s?op=%s", mc->base_url, path, op)
                    : xasprintf("%s%s", mc->base_url, path);
}

/* For GET: moves the parameters into the query string. */
static void call_query(struct call *c)
{
        char *url;

        if (!c->form.len)
                return;
        url = xasprintf("%s%c%s", c->url, strchr(c->url, '?') ? '&' : '?', c->form.data);
        free(c->url);
        c->url = url;
        buf_reset(&c->form);
}

static void call_release(struct call *c)
{
        free(c->url);
        buf_release(&c->form);
}

/* system_id goes into a path: reject anything that could change the URL. */
static bool id_ok(const char *s)
{
        if (!s || !*s || strlen(s) > 64)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
                        return false;
        return true;
}

static int bad_id(struct maas_error *err)
{
        if (err) {
                maas_error_release(err);
                err->cls = MAAS_ERR_VALIDATION;
                err->message = xstrdup("invalid system_id");
        }
        return CM_EINVAL;
}

/* --- running a call and decoding ---------------------------------------------------------------
 */

typedef int decode_fn(const cJSON *doc, void *ret);

static int dec_machine(const cJSON *d, void *ret)
{
        return maas_node_from_json(d, ret);
}

static int dec_named(const cJSON *d, void *ret)
{
        return maas_named_list_from_json(d, ret);
}

static int dec_boots(const cJSON *d, void *ret)
{
        return maas_boot_resource_list_from_json(d, ret);
}

static int dec_dns(const cJSON *d, void *ret)
{
        return maas_dns_resource_from_json(d, ret);
}

static int dec_dns_list(const cJSON *d, void *ret)
{
        return maas_dns_list_from_json(d, ret);
}

static int dec_version(const cJSON *d, void *ret)
{
        return maas_version_from_json(d, ret);
}

static int dec_user(const cJSON *d, void *ret)
{
        return maas_user_from_json(d, ret);
}

static int dec_power(const cJSON *d, void *ret)
{
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(d, "state");

        if (!cJSON_IsString(s))
                return CM_EPARSE;
        *(char **)ret = xstrdup(s->valuestring);
        return 0;
}

/* Runs c, decodes into ret (when both dec and ret are set) and releases c. */
static void shape_error(struct maas_error *err)
{
        if (err && !err->message) {
                err->cls = MAAS_ERR_PROTOCOL;
                err->message = xstrdup("unexpected JSON shape in MAAS's answer");
        }
}

static int run(
        struct maas_client *mc, struct call *c, decode_fn *dec, void *ret, struct maas_error *err)
{
        struct transport_response resp = { .retry_after_s = -1 };
        cJSON *doc = NULL;
        bool want = dec && ret;
        int r = maas_do(mc, c, &resp, err);

        if (r == 0 && want)
                r = parse_body(&resp, &doc, err);
        if (r == 0 && want) {
                r = doc ? dec(doc, ret) : CM_EPARSE;
                if (r < 0)
                        shape_error(err);
        }
        cJSON_Delete(doc);
        transport_response_release(&resp);
        call_release(c);
        return r;
}

static int machines_chunk(void *arg, const char *data, size_t n)
{
        return maas_node_stream_feed(arg, data, n) < 0; /* nonzero ends the transfer */
}

static void machines_reset(void *arg)
{
        maas_node_stream_reset(arg);
}

/* A malformed or oversized list: MAAS answered, but not with something we take. */
static void list_error(struct maas_error *err, const struct maas_node_stream *ns)
{
        if (!err)
                return;
        free(err->message);
        err->http_status = 200;
        err->cls = MAAS_ERR_PROTOCOL;
        err->message = xasprintf("MAAS's machine list: %s", ns->message);
}

/* A machine list, decoded machine by machine as the body arrives (maas_node_stream): a
 * large list is never held whole, as text or as a tree. A transport that cannot stream
 * buffers the body (up to its cap), which is then decoded the same way. */
static int run_machines(struct maas_client *mc,
                        struct call *c,
                        struct maas_node_list *ret,
                        struct maas_error *err)
{
        struct transport_response resp = { .retry_after_s = -1 };
        struct maas_node_stream ns;
        struct sink sk = { .on_chunk = machines_chunk, .reset = machines_reset, .arg = &ns };
        int r;

        maas_node_stream_init(&ns);
        r = maas_do_into(mc, c, &sk, &resp, err);
        if (r == 0 && !streams(mc, &sk))
                r = maas_node_stream_feed(&ns, resp.body, resp.body_len);
        if (r == 0)
                r = maas_node_stream_finish(&ns, ret);
        if (r == CM_EPARSE || (r == CM_ETOOBIG && ns.message[0]))
                list_error(err, &ns);
        maas_node_stream_release(&ns);
        transport_response_release(&resp);
        call_release(c);
        return r;
}

static int get_simple(struct maas_client *mc,
                      const char *path,
                      const char *op,
                      decode_fn *dec,
                      void *ret,
                      struct maas_error *err)
{
        struct call c;

        call_init(&c, mc, "GET", path, op, true);
        return run(mc, &c, dec, ret, err);
}

/* --- discovery and inventory ------------------------------------------------------------------ */

int maas_get_version(struct maas_client *mc, struct maas_version *ret, struct maas_error *err)
{
        return get_simple(mc, "version/", NULL, dec_version, ret, err);
}

int maas_whoami(struct maas_client *mc, struct maas_user *ret, struct maas_error *err)
{
        return get_simple(mc, "users/", "whoami", dec_user, ret, err);
}

int maas_list_zones(struct maas_client *mc, struct maas_named_list *ret, struct maas_error *err)
{
        return get_simple(mc, "zones/", NULL, dec_named, ret, err);
}

int maas_list_pools(struct maas_client *mc, struct maas_named_list *ret, struct maas_error *err)
{
        return get_simple(mc, "resourcepools/", NULL, dec_named, ret, err);
}

int maas_list_tags(struct maas_client *mc, struct maas_named_list *ret, struct maas_error *err)
{
        return get_simple(mc, "tags/", NULL, dec_named, ret, err);
}

int maas_list_domains(struct maas_client *mc, struct maas_named_list *ret, struct maas_error *err)
{
        return get_simple(mc, "domains/", NULL, dec_named, ret, err);
}

int maas_list_boot_resources(struct maas_client *mc,
                             struct maas_boot_resource_list *ret,
                             struct maas_error *err)
{
        return get_simple(mc, "boot-resources/", NULL, dec_boots, ret, err);
}

/* --- machines ------------------------------------------------------------------------------------
 */

static void form_add_opt(struct call *c, const char *k, const char *v)
{
        if (v)
                form_add(c, k, v);
}

int maas_list_machines(struct maas_client *mc,
                       const struct maas_node_filter *f,
                       struct maas_node_list *ret,
                       struct maas_error *err)
{
        struct call c;

        call_init(&c, mc, "GET", "machines/", NULL, true);
        if (f) {
                form_add_all(&c, "id", f->ids, f->n_ids);
                form_add_opt(&c, "hostname", f->hostname);
                form_add_opt(&c, "zone", f->zone);
                form_add_opt(&c, "pool", f->pool);
                form_add_opt(&c, "agent_name", f->agent_name);
                form_add_all(&c, "agent_name", f->agent_names, f->n_agent_names);
                form_add_all(&c, "tags", f->tags, f->n_tags);
        }
        call_query(&c);
        return run_machines(mc, &c, ret, err);
}

/* A call on machines/<system_id>/ with an optional op. */
static bool machine_call(struct call *c,
                         struct maas_client *mc,
                         const char *method,
                         const char *system_id,
                         const char *op,
                         bool idempotent)
{
        char *path;

        if (!id_ok(system_id))
                return false;
        path = xasprintf("machines/%s/", system_id);
        call_init(c, mc, method, path, op, idempotent);
        free(path);
        return true;
}

int maas_get_machine(struct maas_client *mc,
                     const char *system_id,
                     struct maas_node *ret,
                     struct maas_error *err)
{
        struct call c;

        if (!machine_call(&c, mc, "GET", system_id, NULL, true))
                return bad_id(err);
        return run(mc, &c, dec_machine, ret, err);
}

static void num_param(struct call *c, const char *k, double v)
{
        char num[32];

        if (v <= 0)
                return;
        snprintf(num, sizeof(num), "%.17g", v);
        form_add(c, k, num);
}

int maas_allocate(struct maas_client *mc,
                  const struct maas_allocate_opts *o,
                  struct maas_node *ret,
                  struct maas_error *err)
{
        struct call c;

        /* never repeated after a 5xx or lost answer: the caller finds it by agent_name */
        call_init(&c, mc, "POST", "machines/", "allocate", false);
        c.allocate = true;
        num_param(&c, "cpu_count", o->cpu_count);
        num_param(&c, "mem", o->mem_mib);
        form_add_opt(&c, "zone", o->zone);
        form_add_opt(&c, "pool", o->pool);
        form_add_all(&c, "tags", o->tags, o->n_tags);
        form_add_all(&c, "not_tags", o->not_tags, o->n_not_tags);
        form_add_opt(&c, "system_id", o->system_id);
        form_add_opt(&c, "agent_name", o->agent_name);
        form_add_opt(&c, "comment", o->comment);
        if (o->dry_run)
                form_add_bool(&c, "dry_run", true);
        if (o->not_pod_type) {
                form_add_bool(&c, "not_pod", true);
                form_add(&c, "not_pod_type", o->not_pod_type);
        }
        form_add_opt(&c, "arch", o->arch);
        form_add_opt(&c, "storage", o->storage);
        return run(mc, &c, dec_machine, ret, err);
}

int maas_set_storage_layout(struct maas_client *mc,
                            const char *system_id,
                            const struct maas_storage_layout *o,
                            struct maas_node *ret,
                            struct maas_error *err)
{
        struct call c;

        /* the layout replaces the storage configuration as a whole: safe to repeat */
        if (!machine_call(&c, mc, "POST", system_id, "set_storage_layout", true))
                return bad_id(err);
        form_add_opt(&c, "storage_layout", o->layout);
        form_add_opt(&c, "boot_size", o->boot_size);
        form_add_opt(&c, "root_size", o->root_size);
        form_add_opt(&c, "vg_name", o->vg_name);
        form_add_opt(&c, "lv_name", o->lv_name);
        form_add_opt(&c, "lv_size", o->lv_size);
        form_add_opt(&c, "cache_mode", o->cache_mode);
        form_add_opt(&c, "cache_size", o->cache_size);
        if (o->cache_no_part)
                form_add_bool(&c, "cache_no_part", true);
        return run(mc, &c, dec_machine, ret, err);
}

int maas_update_machine(struct maas_client *mc,
                        const char *system_id,
                        const struct maas_update_opts *o,
                        struct maas_node *ret,
                        struct maas_error *err)
{
        struct call c;
        char num[32];

        if (!machine_call(&c, mc, "PUT", system_id, NULL, true))
                return bad_id(err);
        if (o->swap_size >= 0) {
                snprintf(num, sizeof(num), "%lld", (long long)o->swap_size);
                form_add(&c, "swap_size", num);
        }
        form_add_opt(&c, "hostname", o->hostname);
        return run(mc, &c, dec_machine, ret, err);
}

void maas_split_image(const char *image, char **ret_osystem, char **ret_series)
{
        const char *slash = image ? strchr(image, '/') : NULL;

        if (!slash) {
                *ret_osystem = xstrdup("custom");
                *ret_series = xstrdup(image ? image : "");
                return;
        }
        *ret_osystem = xstrndup(image, (size_t)(slash - image));
        *ret_series = xstrdup(slash + 1);
}

int maas_deploy(struct maas_client *mc,
                const char *system_id,
                const struct maas_deploy_opts *o,
                struct maas_node *ret,
                struct maas_error *err)
{
        struct call c;
        char *os, *series, *ud;

        if (!machine_call(&c, mc, "POST", system_id, "deploy", false))
                return bad_id(err);
        maas_split_image(o->image, &os, &series);
        form_add(&c, "osystem", os);
        form_add(&c, "distro_series", series);
        if (o->user_data) {
                ud = base64_encode(o->user_data,
                                   o->user_data_len ? o->user_data_len : strlen(o->user_data));
                form_add(&c, "user_data", ud);
                free(ud);
        }
        form_add_bool(&c, "ephemeral_deploy", o->ephemeral_deploy);
        form_add_opt(&c, "hwe_kernel", o->hwe_kernel);
        free(os);
        free(series);
        return run(mc, &c, dec_machine, ret, err);
}

int maas_release(struct maas_client *mc,
                 const char *system_id,
                 const struct maas_release_opts *o,
                 struct maas_node *ret,
                 struct maas_error *err)
{
        struct call c;

        /* releasing a Releasing or Ready machine is a no-op success: safe to repeat */
        if (!machine_call(&c, mc, "POST", system_id, "release", true))
                return bad_id(err);
        if (o && o->erase)
                form_add_bool(&c, "erase", true);
        if (o && o->quick_erase)
                form_add_bool(&c, "quick_erase", true);
        if (o && o->secure_erase)
                form_add_bool(&c, "secure_erase", true);
        if (o && o->force)
                form_add_bool(&c, "force", true);
        if (o)
                form_add_opt(&c, "comment", o->comment);
        return run(mc, &c, dec_machine, ret, err);
}

int maas_power_on(struct maas_client *mc,
                  const char *system_id,
                  const char *comment,
                  struct maas_node *ret,
                  struct maas_error *err)
{
        struct call c;

        if (!machine_call(&c, mc, "POST", system_id, "power_on", true))
                return bad_id(err);
        form_add_opt(&c, "comment", comment); /* encoded once, unlike the reference */
        return run(mc, &c, dec_machine, ret, err);
}

int maas_power_off(struct maas_client *mc,
                   const char *system_id,
                   struct maas_node *ret,
                   struct maas_error *err)
{
        struct call c;

        if (!machine_call(&c, mc, "POST", system_id, "power_off", true))
                return bad_id(err);
        return run(mc, &c, dec_machine, ret, err);
}

int maas_query_power_state(struct maas_client *mc,
                           const char *system_id,
                           char **ret_state,
                           struct maas_error *err)
{
        struct call c;

        if (!machine_call(&c, mc, "GET", system_id, "query_power_state", true))
                return bad_id(err);
        return run(mc, &c, dec_power, ret_state, err);
}

int maas_set_owner_data(struct maas_client *mc,
                        const char *system_id,
                        const char *const *keys,
                        const char *const *values,
                        size_t n,
                        struct maas_node *ret,
                        struct maas_error *err)
{
        struct call c;

        if (!machine_call(&c, mc, "POST", system_id, "set_owner_data", true))
                return bad_id(err);
        for (size_t i = 0; i < n; i++)
                form_add(&c, keys[i], values[i] ? values[i] : "");
        return run(mc, &c, dec_machine, ret, err);
}

/* --- DNS resources --------------------------------------------------------------------------- */

int maas_list_dns_resources(struct maas_client *mc,
                            const char *fqdn,
                            struct maas_dns_list *ret,
                            struct maas_error *err)
{
        struct call c;

        call_init(&c, mc, "GET", "dnsresources/", NULL, true);
        form_add_opt(&c, "fqdn", fqdn);
        call_query(&c);
        return run(mc, &c, dec_dns_list, ret, err);
}

int maas_list_dns_resources_named(struct maas_client *mc,
                                  const char *name,
                                  struct maas_dns_list *ret,
                                  struct maas_error *err)
{
        struct call c;

        if (!name || !*name)
                return bad_id(err);
        call_init(&c, mc, "GET", "dnsresources/", NULL, true);
        form_add(&c, "name", name);
        call_query(&c);
        return run(mc, &c, dec_dns_list, ret, err);
}

/* ip_addresses is ONE field holding space-separated addresses (maas-api.md §7.8). */
static void form_add_ips(struct call *c, const char *const *ips, size_t n)
{
        struct buf b;

        buf_init(&b, FORM_MAX);
        for (size_t i = 0; i < n; i++)
                if (buf_printf(&b, "%s%s", i ? " " : "", ips[i]) < 0)
                        abort();
        form_add(c, "ip_addresses", b.data ? b.data : "");
        buf_release(&b);
}

int maas_create_dns_resource(struct maas_client *mc,
                             const char *fqdn,
                             int ttl,
                             const char *const *ips,
                             size_t n_ips,
                             struct maas_dns_resource *ret,
                             struct maas_error *err)
{
        struct call c;
        char num[16];

        call_init(&c, mc, "POST", "dnsresources/", NULL, false);
        form_add(&c, "fqdn", fqdn);
        if (ttl >= 0) {
                snprintf(num, sizeof(num), "%d", ttl);
                form_add(&c, "address_ttl", num);
        }
        form_add_ips(&c, ips, n_ips);
        return run(mc, &c, dec_dns, ret, err);
}

int maas_update_dns_resource_ips(struct maas_client *mc,
                                 int id,
                                 const char *const *ips,
                                 size_t n_ips,
                                 struct maas_dns_resource *ret,
                                 struct maas_error *err)
{
        struct call c;
        char *path = xasprintf("dnsresources/%d/", id);

        call_init(&c, mc, "PUT", path, NULL, true);
        free(path);
        form_add_ips(&c, ips, n_ips);
        return run(mc, &c, dec_dns, ret, err);
}

int maas_delete_dns_resource(struct maas_client *mc, int id, struct maas_error *err)
{
        struct call c;
        char *path = xasprintf("dnsresources/%d/", id);

        call_init(&c, mc, "DELETE", path, NULL, true);
        free(path);
        return run(mc, &c, NULL, NULL, err);
}

/* --- tags ------------------------------------------------------------------------------------ */

/* MAAS's 400 for a tag name in use: {"name": ["Tag with this Name already exists."]}. */
static bool tag_exists_error(const struct maas_error *e)
{
        const cJSON *msgs = e ? cJSON_GetObjectItemCaseSensitive(e->fields, "name") : NULL;
        const cJSON *m;

        if (!e || e->cls != MAAS_ERR_VALIDATION)
                return false;
        cJSON_ArrayForEach (m, msgs)
                if (cJSON_IsString(m) && strstr(m->valuestring, "already exists"))
                        return true;
        return e->message && strstr(e->message, "already exists");
}

int maas_create_tag(struct maas_client *mc,
                    const char *name,
                    const char *comment,
                    struct maas_error *err)
{
        struct call c;
        int r;

        if (!id_ok(name))
                return bad_id(err);
        call_init(&c, mc, "POST", "tags/", NULL, false);
        form_add(&c, "name", name);
        form_add_opt(&c, "comment", comment);
        r = run(mc, &c, NULL, NULL, err);
        return r && tag_exists_error(err) ? CM_EEXIST : r;
}

/* A call on tags/<name>/ (op may be NULL); CM_EINVAL, nothing set up, for a name that
 * cannot go into a path. */
static int tag_call(struct call *c,
                    struct maas_client *mc,
                    const char *method,
                    const char *name,
                    const char *op,
                    struct maas_error *err)
{
        char *path;

        if (!id_ok(name))
                return bad_id(err);
        path = xasprintf("tags/%s/", name);
        call_init(c, mc, method, path, op, true);
        free(path);
        return CM_OK;
}

int maas_tag_update_nodes(struct maas_client *mc,
                          const char *name,
                          const char *const *add,
                          size_t n_add,
                          const char *const *remove,
                          size_t n_remove,
                          struct maas_error *err)
{
        struct call c;
        int r = tag_call(&c, mc, "POST", name, "update_nodes", err); /* adding twice adds once */

        if (r < 0)
                return r;
        form_add_all(&c, "add", add, n_add);
        form_add_all(&c, "remove", remove, n_remove);
        return run(mc, &c, NULL, NULL, err);
}

int maas_update_tag_comment(struct maas_client *mc,
                            const char *name,
                            const char *comment,
                            struct maas_error *err)
{
        struct call c;
        int r = tag_call(&c, mc, "PUT", name, NULL, err);

        if (r < 0)
                return r;
        form_add(&c, "comment", comment ? comment : "");
        return run(mc, &c, NULL, NULL, err);
}

int maas_delete_tag(struct maas_client *mc, const char *name, struct maas_error *err)
{
        struct call c;
        int r = tag_call(&c, mc, "DELETE", name, NULL, err);

        return r < 0 ? r : run(mc, &c, NULL, NULL, err);
}

/* --- network: subnets and interface links ----------------------------------------------------- */

/* Links unlinked from one interface in one call at most: a region answering with the link
 * still there cannot keep the loop going. */
#define MAX_UNLINKS 16

static int dec_subnets(const cJSON *d, void *ret)
{
        return maas_subnet_list_from_json(d, ret);
}

static int dec_ifaces(const cJSON *d, void *ret)
{
        return maas_interface_list_from_json(d, ret);
}

static int dec_iface(const cJSON *d, void *ret)
{
        return maas_interface_from_json(d, ret);
}

/* An error found here, not in MAAS's answer (no HTTP status). */
static int local_error(struct maas_error *err, int code, enum maas_error_class cls, struct buf *msg)
{
        if (err) {
                maas_error_release(err);
                err->cls = cls;
                err->message = xstrdup(msg->data ? msg->data : maas_strerror(code));
        }
        buf_release(msg);
        return code;
}

int maas_list_subnets(struct maas_client *mc, struct maas_subnet_list *ret, struct maas_error *err)
{
        return get_simple(mc, "subnets/", NULL, dec_subnets, ret, err);
}

int maas_list_interfaces(struct maas_client *mc,
                         const char *system_id,
                         struct maas_interface_list *ret,
                         struct maas_error *err)
{
        struct call c;
        char *path;

        if (!id_ok(system_id))
                return bad_id(err);
        path = xasprintf("nodes/%s/interfaces/", system_id);
        call_init(&c, mc, "GET", path, NULL, true);
        free(path);
        return run(mc, &c, dec_ifaces, ret, err);
}

/* POST nodes/<sid>/interfaces/<id>/?op=op: never repeated (a second link or unlink acts
 * twice, or fails on what the first did). */
static void iface_call(
        struct call *c, struct maas_client *mc, const char *system_id, int iface_id, const char *op)
{
        char *path = xasprintf("nodes/%s/interfaces/%d/", system_id, iface_id);

        call_init(c, mc, "POST", path, op, false);
        free(path);
}

static int link_subnet(struct maas_client *mc,
                       const char *system_id,
                       int iface_id,
                       const char *mode,
                       int subnet_id,
                       const char *ip,
                       bool default_gateway,
                       struct maas_interface *ret,
                       struct maas_error *err)
{
        struct call c;
        char num[16];

        iface_call(&c, mc, system_id, iface_id, "link_subnet");
        form_add(&c, "mode", mode);
        snprintf(num, sizeof(num), "%d", subnet_id);
        form_add(&c, "subnet", num);
        form_add_opt(&c, "ip_address", ip);
        if (default_gateway)
                form_add_bool(&c, "default_gateway", true);
        return run(mc, &c, dec_iface, ret, err);
}

static int unlink_subnet(struct maas_client *mc,
                         const char *system_id,
                         int iface_id,
                         int link_id,
                         struct maas_interface *ret,
                         struct maas_error *err)
{
        struct call c;
        char num[16];

        iface_call(&c, mc, system_id, iface_id, "unlink_subnet");
        snprintf(num, sizeof(num), "%d", link_id);
        form_add(&c, "id", num);
        return run(mc, &c, dec_iface, ret, err);
}

/* The subnet whose CIDR is cidr (moved into *ret); CM_ENOTFOUND naming MAAS's subnets
 * otherwise. */
static int subnet_by_cidr(struct maas_client *mc,
                          const char *cidr,
                          struct maas_subnet *ret,
                          struct maas_error *err)
{
        struct maas_subnet_list l = { 0 };
        struct buf msg;
        int r = maas_list_subnets(mc, &l, err);

        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++)
                if (cidr && strcmp(l.items[i].cidr, cidr) == 0) {
                        *ret = l.items[i];
                        l.items[i] = l.items[--l.n];
                        maas_subnet_list_release(&l);
                        return 0;
                }
        buf_init(&msg, MESSAGE_MAX);
        (void)!buf_printf(&msg, "MAAS has no subnet %s (its subnets:", cidr ? cidr : "");
        for (size_t i = 0; i < l.n; i++)
                (void)!buf_printf(&msg, "%s %s", i ? "," : "", l.items[i].cidr);
        (void)!buf_printf(&msg, "%s)", l.n ? "" : " none");
        maas_subnet_list_release(&l);
        return local_error(err, CM_ENOTFOUND, MAAS_ERR_NOT_FOUND, &msg);
}

static bool strv_has(const struct maas_strv *v, const char *s)
{
        for (size_t i = 0; i < v->n; i++)
                if (strcmp(v->v[i], s) == 0)
                        return true;
        return false;
}

/* o's gateway and nameservers are the subnet's (MAAS has no per-link ones). */
static int check_subnet_fits(const struct maas_static_ip *o,
                             const struct maas_subnet *sn,
                             struct maas_error *err)
{
        struct buf msg;

        buf_init(&msg, MESSAGE_MAX);
        if (o->gateway && (!sn->gateway_ip || strcmp(o->gateway, sn->gateway_ip) != 0))
                (void)!buf_printf(&msg,
                                  "gateway %s is not the gateway of MAAS subnet %s (%s%s): MAAS "
                                  "gives a static address its subnet's gateway",
                                  o->gateway, sn->cidr, sn->gateway_ip ? "" : "it has none",
                                  sn->gateway_ip ? sn->gateway_ip : "");
        for (size_t i = 0; !msg.len && i < o->n_nameservers; i++) {
                if (strv_has(&sn->dns_servers, o->nameservers[i]))
                        continue;
                (void)!buf_printf(&msg, "nameserver %s is not a DNS server of MAAS subnet %s (",
                                  o->nameservers[i], sn->cidr);
                for (size_t k = 0; k < sn->dns_servers.n; k++)
                        (void)!buf_printf(&msg, "%s%s", k ? ", " : "", sn->dns_servers.v[k]);
                (void)!buf_printf(&msg, "%s): MAAS gives a static address its subnet's DNS servers",
                                  sn->dns_servers.n ? "" : "it has none");
        }
        if (!msg.len) {
                buf_release(&msg);
                return 0;
        }
        return local_error(err, CM_EINVAL, MAAS_ERR_VALIDATION, &msg);
}

/* The interface o names (or the boot one, or the first); moved into *ret. */
static int pick_interface(struct maas_client *mc,
                          const char *system_id,
                          const struct maas_static_ip *o,
                          struct maas_interface *ret,
                          struct maas_error *err)
{
        struct maas_interface_list l = { 0 };
        struct buf msg;
        int r = maas_list_interfaces(mc, system_id, &l, err);

        if (r < 0)
                return r;
        for (size_t i = 0; i < l.n; i++) {
                const struct maas_interface *f = &l.items[i];
                bool boot = o->boot_interface_id >= 0 ? f->id == o->boot_interface_id : i == 0;

                if (o->interface ? strcmp(f->name, o->interface) == 0 : boot) {
                        *ret = l.items[i];
                        l.items[i] = l.items[--l.n];
                        maas_interface_list_release(&l);
                        return 0;
                }
        }
        buf_init(&msg, MESSAGE_MAX);
        (void)!buf_printf(&msg, "MAAS machine %s has no %s%s (its interfaces:", system_id,
                          o->interface ? "interface " : "boot interface",
                          o->interface ? o->interface : "");
        for (size_t i = 0; i < l.n; i++)
                (void)!buf_printf(&msg, "%s %s", i ? "," : "", l.items[i].name);
        (void)!buf_printf(&msg, "%s)", l.n ? "" : " none");
        maas_interface_list_release(&l);
        return local_error(err, CM_ENOTFOUND, MAAS_ERR_NOT_FOUND, &msg);
}

static bool holds(const struct maas_interface *f, const char *ip)
{
        for (size_t k = 0; k < f->n_links; k++)
                if (f->links[k].mode == MAAS_LINK_STATIC && f->links[k].ip &&
                    strcmp(f->links[k].ip, ip) == 0)
                        return true;
        return false;
}

/* Hands *f to ret (or frees it). */
static void give_interface(struct maas_interface *f, struct maas_interface *ret)
{
        if (ret) {
                *ret = *f;
                *f = (struct maas_interface){ 0 };
        }
        maas_interface_release(f);
}

/* Unlinks the first link of *f that drop() picks; *f becomes MAAS's answer. 1 when one was
 * unlinked, 0 when none is left, or an error. */
static int unlink_one(struct maas_client *mc,
                      const char *system_id,
                      struct maas_interface *f,
                      bool (*drop)(const struct maas_link *l, const char *ip),
                      const char *ip,
                      int *ret_subnet,
                      struct maas_error *err)
{
        struct maas_interface after = { 0 };
        int r;

        for (size_t k = 0; k < f->n_links; k++) {
                if (!drop(&f->links[k], ip))
                        continue;
                if (ret_subnet && f->links[k].subnet_id >= 0)
                        *ret_subnet = f->links[k].subnet_id;
                r = unlink_subnet(mc, system_id, f->id, f->links[k].id, &after, err);
                if (r < 0)
                        return r;
                maas_interface_release(f);
                *f = after;
                return 1;
        }
        return 0;
}

static bool drop_dynamic(const struct maas_link *l, const char *ip)
{
        (void)ip;
        return l->mode == MAAS_LINK_AUTO || l->mode == MAAS_LINK_DHCP;
}

static bool drop_static(const struct maas_link *l, const char *ip)
{
        return l->mode == MAAS_LINK_STATIC && l->ip && strcmp(l->ip, ip) == 0;
}

int maas_link_static_ip(struct maas_client *mc,
                        const char *system_id,
                        const struct maas_static_ip *o,
                        struct maas_interface *ret,
                        struct maas_error *err)
{
        struct maas_interface f = { 0 }, after = { 0 };
        struct maas_subnet sn = { 0 };
        int r;

        if (!id_ok(system_id))
                return bad_id(err);
        r = subnet_by_cidr(mc, o->cidr, &sn, err);
        if (r == 0)
                r = check_subnet_fits(o, &sn, err);
        if (r == 0)
                r = pick_interface(mc, system_id, o, &f, err);
        if (r < 0 || holds(&f, o->ip))
                goto out;
        for (int i = 0; i < MAX_UNLINKS &&
                        (r = unlink_one(mc, system_id, &f, drop_dynamic, NULL, NULL, err)) > 0;
             i++)
                ;
        if (r < 0)
                goto out;
        r = link_subnet(mc, system_id, f.id, "STATIC", sn.id, o->ip, sn.gateway_ip != NULL, &after,
                        err);
        if (r == 0) {
                maas_interface_release(&f);
                f = after;
        }
out:
        if (r == 0)
                give_interface(&f, ret);
        maas_interface_release(&f);
        maas_subnet_release(&sn);
        return r;
}

static bool has_auto(const struct maas_interface *f)
{
        for (size_t k = 0; k < f->n_links; k++)
                if (f->links[k].mode == MAAS_LINK_AUTO)
                        return true;
        return false;
}

int maas_unlink_static_ip(struct maas_client *mc,
                          const char *system_id,
                          const struct maas_static_ip *o,
                          struct maas_interface *ret,
                          struct maas_error *err)
{
        struct maas_interface f = { 0 }, after = { 0 };
        int subnet = -1, r;

        if (!id_ok(system_id))
                return bad_id(err);
        r = pick_interface(mc, system_id, o, &f, err);
        if (r < 0)
                goto out;
        for (int i = 0; i < MAX_UNLINKS &&
                        (r = unlink_one(mc, system_id, &f, drop_static, o->ip, &subnet, err)) > 0;
             i++)
                ;
        r = r > 0 ? 0 : r; /* MAX_UNLINKS reached: MAAS's answer decides below */
        if (r < 0 || has_auto(&f))
                goto out;
        if (subnet < 0) {
                struct maas_subnet sn = { 0 };

                r = subnet_by_cidr(mc, o->cidr, &sn, err);
                subnet = sn.id;
                maas_subnet_release(&sn);
        }
        if (r == 0)
                r = link_subnet(mc, system_id, f.id, "AUTO", subnet, NULL, false, &after, err);
        if (r == 0) {
                maas_interface_release(&f);
                f = after;
        }
out:
        if (r == 0)
                give_interface(&f, ret);
        maas_interface_release(&f);
        return r;
}

/* --- VM hosts: list, compose, delete (maas_pods.h) ------------------------------------------ */

static int dec_pods(const cJSON *d, void *ret)
{
        return maas_pod_list_from_json(d, ret);
}

static int dec_composed(const cJSON *d, void *ret)
{
        const char *sid = json_find_str(d, "system_id", NULL);

        if (!sid || !id_ok(sid))
                return CM_EPARSE;
        *(char **)ret = xstrdup(sid);
        return 0;
}

int maas_list_pods(struct maas_client *mc, struct maas_pod_list *ret, struct maas_error *err)
{
        return get_simple(mc, "pods/", NULL, dec_pods, ret, err);
}

static void int_param(struct call *c, const char *k, int64_t v)
{
        char num[32];

        snprintf(num, sizeof(num), "%lld", (long long)v);
        form_add(c, k, num);
}

int maas_compose(struct maas_client *mc,
                 int pod_id,
                 const struct maas_compose_opts *o,
                 char **ret_system_id,
                 struct maas_error *err)
{
        struct call c;
        char *path, *storage;

        if (pod_id < 0 || !o->hostname || !id_ok(o->hostname) ||
            (o->storage_pool && (!*o->storage_pool || strpbrk(o->storage_pool, ",()"))))
                return bad_id(err);
        path = xasprintf("pods/%d/", pod_id);
        /* never repeated after a 5xx or lost answer: the caller finds the VM by hostname */
        call_init(&c, mc, "POST", path, "compose", false);
        free(path);
        int_param(&c, "cores", o->cores);
        int_param(&c, "memory", o->memory_mib);
        storage = o->storage_pool
                          ? xasprintf("root:%lld(%s)", (long long)o->disk_gb, o->storage_pool)
                          : xasprintf("root:%lld", (long long)o->disk_gb);
        form_add(&c, "storage", storage);
        free(storage);
        form_add(&c, "hostname", o->hostname);
        form_add_opt(&c, "architecture", o->architecture);
        if (o->zone_id >= 0)
                int_param(&c, "zone", o->zone_id);
        if (o->pool_id >= 0)
                int_param(&c, "pool", o->pool_id);
        return run(mc, &c, dec_composed, ret_system_id, err);
}

int maas_delete_machine(struct maas_client *mc, const char *system_id, struct maas_error *err)
{
        struct call c;

        if (!machine_call(&c, mc, "DELETE", system_id, NULL, true))
                return bad_id(err);
        return run(mc, &c, NULL, NULL, err);
}

/* --- IP addresses: user reservations and IP ranges -------------------------------------------- */

static int dec_ip_address(const cJSON *d, void *ret)
{
        return maas_ip_address_from_json(d, ret);
}

static int dec_ip_address_list(const cJSON *d, void *ret)
{
        return maas_ip_address_list_from_json(d, ret);
}

static int dec_ip_range_list(const cJSON *d, void *ret)
{
        return maas_ip_range_list_from_json(d, ret);
}

int maas_reserve_ip(struct maas_client *mc,
                    const struct maas_reserve_ip *o,
                    struct maas_ip_address *ret,
                    struct maas_error *err)
{
        struct call c;

        call_init(&c, mc, "POST", "ipaddresses/", "reserve", false);
        form_add_opt(&c, "ip", o->ip);
        form_add_opt(&c, "subnet", o->subnet);
        form_add_opt(&c, "hostname", o->hostname);
        form_add_opt(&c, "mac", o->mac);
        return run(mc, &c, dec_ip_address, ret, err);
}

int maas_release_ip(struct maas_client *mc, const char *ip, struct maas_error *err)
{
        struct call c;

        call_init(&c, mc, "POST", "ipaddresses/", "release", true);
        form_add(&c, "ip", ip);
        return run(mc, &c, NULL, NULL, err);
}

int maas_list_ip_addresses(struct maas_client *mc,
                           const char *ip,
                           bool all,
                           struct maas_ip_address_list *ret,
                           struct maas_error *err)
{
        struct call c;

        call_init(&c, mc, "GET", "ipaddresses/", NULL, true);
        form_add_opt(&c, "ip", ip);
        if (all)
                form_add_bool(&c, "all", true);
        call_query(&c);
        return run(mc, &c, dec_ip_address_list, ret, err);
}

int maas_list_ip_ranges(struct maas_client *mc,
                        struct maas_ip_range_list *ret,
                        struct maas_error *err)
{
        return get_simple(mc, "ipranges/", NULL, dec_ip_range_list, ret, err);
}
