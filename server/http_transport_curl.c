/*
 * http_transport_curl: the production transport. One CURL easy handle per transport,
 * reset (not recreated) before every request so its connection cache gives keep-alive.
 * CURLOPT_NOSIGNAL because we are multi-threaded; explicit connect and total timeouts; the
 * body goes through a capped struct buf, so a peer cannot make us buffer more than
 * max_body. TLS verification is on unless the caller opted out explicitly.
 * Threads: a transport is confined to one thread (see http_transport.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "buf.h"
#include "err.h"
#include "http_transport.h"
#include "xalloc.h"

struct curl_transport {
        struct http_transport base;
        CURL *h;
        char *ca_file;
        bool insecure;
        uint32_t connect_timeout_ms;
        uint32_t timeout_ms;
        size_t max_body;
};

/* Per-request scratch space the callbacks write into. */
struct xfer {
        struct buf body;
        bool too_big;
        char *content_type;
        long retry_after_s;
        char errbuf[CURL_ERROR_SIZE];
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
        struct xfer *x = ud;

        if (buf_append(&x->body, p, size * n) < 0) {
                x->too_big = true;
                return 0; /* makes curl fail with CURLE_WRITE_ERROR */
        }
        return size * n;
}

/* Copies a header's value without its trailing CRLF. */
static char *header_value(const char *line, size_t n, size_t name_len)
{
        const char *v = line + name_len;
        size_t vl = n - name_len;

        while (vl > 0 && (*v == ' ' || *v == '\t')) {
                v++;
                vl--;
        }
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
                vl--;
        return xstrndup(v, vl);
}

static size_t on_header(char *line, size_t size, size_t n, void *ud)
{
        struct xfer *x = ud;
        size_t len = size * n;
        char *v, *end = NULL;
        long s;

        if (len > 13 && strncasecmp(line, "Content-Type:", 13) == 0) {
                free(x->content_type);
                x->content_type = header_value(line, len, 13);
        } else if (len > 12 && strncasecmp(line, "Retry-After:", 12) == 0) {
                v = header_value(line, len, 12);
                s = strtol(v, &end, 10);
                /* only the integer form: an HTTP-date is ignored, as gomaasapi does */
                x->retry_after_s = (end != v && *end == '\0' && s >= 0) ? s : -1;
                free(v);
        }
        return len;
}

static struct curl_slist *build_headers(const struct transport_request *req)
{
        struct curl_slist *l = NULL, *n;

        for (size_t i = 0; i < req->n_headers; i++) {
                n = curl_slist_append(l, req->headers[i]);
                if (!n)
                        abort();
                l = n;
        }
        n = curl_slist_append(l, "Expect:"); /* no 100-continue round trip */
        if (!n)
                abort();
        return n;
}

static void set_method(CURL *h, const struct transport_request *req)
{
        if (strcmp(req->method, "GET") == 0) {
                curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
                return;
        }
        if (strcmp(req->method, "POST") != 0)
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
        if (req->body || strcmp(req->method, "POST") == 0) {
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body ? req->body : "");
                curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        }
}

static void set_options(struct curl_transport *ct,
                        const struct transport_request *req,
                        struct curl_slist *hdrs,
                        struct xfer *x)
{
        CURL *h = ct->h;

        curl_easy_reset(h); /* keeps live connections: keep-alive survives */
        curl_easy_setopt(h, CURLOPT_URL, req->url);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)ct->connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                         (long)(req->timeout_ms ? req->timeout_ms : ct->timeout_ms));
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, ct->insecure ? 0L : 1L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, ct->insecure ? 0L : 2L);
        if (ct->ca_file)
                curl_easy_setopt(h, CURLOPT_CAINFO, ct->ca_file);
        set_method(h, req);
}

static int map_curl_error(struct curl_transport *ct, CURLcode rc, const struct xfer *x)
{
        snprintf(ct->base.error, sizeof(ct->base.error), "%s",
                 x->too_big     ? "response body over the size cap"
                 : x->errbuf[0] ? x->errbuf
                                : curl_easy_strerror(rc));
        if (x->too_big)
                return CM_ETOOBIG;
        if (rc == CURLE_OPERATION_TIMEDOUT)
                return CM_ETIMEDOUT;
        return CM_ETRANSPORT;
}

static int curl_send(struct http_transport *t,
                     const struct transport_request *req,
                     struct transport_response *resp)
{
        struct curl_transport *ct = container_of(t, struct curl_transport, base);
        struct xfer x = { .retry_after_s = -1 };
        struct curl_slist *hdrs = build_headers(req);
        CURLcode rc;
        long status = 0;
        int r;

        buf_init(&x.body, ct->max_body);
        set_options(ct, req, hdrs, &x);
        rc = curl_easy_perform(ct->h);
        curl_easy_setopt(ct->h, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(ct->h, CURLOPT_ERRORBUFFER, NULL); /* x is about to go away */
        curl_slist_free_all(hdrs);
        if (rc != CURLE_OK) {
                r = map_curl_error(ct, rc, &x);
                goto out;
        }
        curl_easy_getinfo(ct->h, CURLINFO_RESPONSE_CODE, &status);
        resp->status = status;
        resp->body = buf_take(&x.body, &resp->body_len);
        resp->content_type = x.content_type;
        resp->retry_after_s = x.retry_after_s;
        x.content_type = NULL;
        r = 0;
out:
        buf_release(&x.body);
        free(x.content_type);
        return r;
}

static void curl_destroy(struct http_transport *t)
{
        struct curl_transport *ct = container_of(t, struct curl_transport, base);

        curl_easy_cleanup(ct->h);
        free(ct->ca_file);
        free(ct);
}

int http_transport_curl_new(const struct http_transport_opts *o, struct http_transport **ret)
{
        struct curl_transport *ct;

        if (o->ca_file && access(o->ca_file, R_OK) != 0)
                return CM_EINVAL;
        ct = xcalloc(1, sizeof(*ct));
        ct->h = curl_easy_init();
        if (!ct->h) {
                free(ct);
                return CM_ENOMEM;
        }
        ct->base.send = curl_send;
        ct->base.destroy = curl_destroy;
        ct->ca_file = o->ca_file ? xstrdup(o->ca_file) : NULL;
        ct->insecure = o->insecure_skip_verify;
        ct->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 5000;
        ct->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
        ct->max_body = o->max_body ? o->max_body : 8u * 1024 * 1024;
        *ret = &ct->base;
        return 0;
}

struct http_transport *http_transport_free(struct http_transport *t)
{
        if (t)
                t->destroy(t);
        return NULL;
}

void transport_response_release(struct transport_response *r)
{
        free(r->body);
        free(r->content_type);
        *r = (struct transport_response){ .retry_after_s = -1 };
}
