/*
 * http_transport_curl: the production transport. One CURL easy handle per transport,
 * reset (not recreated) before every request so its connection cache gives keep-alive.
 * CURLOPT_NOSIGNAL because we are multi-threaded; explicit connect and total timeouts; the
 * body goes through a capped struct buf, so a peer cannot make us buffer more than
 * max_body. TLS verification is on unless the caller opted out explicitly.
 * stream() drives the same easy handle through a private multi handle, polling at most
 * every 100 ms so the caller's stop flag ends a quiet stream (a watch) promptly.
 * Threads: a transport is confined to one thread (see http_transport.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "buf.h"
#include "curl_lib.h"
#include "err.h"
#include "http_transport.h"
#include "log.h"
#include "xalloc.h"

struct curl_transport {
        struct http_transport base;
        CURL *h;
        CURLM *multi; /* created by the first stream() */
        char *ca_file;
        char *cert_file;
        char *key_file;
        bool insecure;
        uint32_t connect_timeout_ms;
        uint32_t timeout_ms;
        size_t max_body;
};

/* libcurl's functions; loaded by http_transport_curl_new before any transport exists. */
static const struct curl_lib *cl(void)
{
        return curl_lib_load(NULL);
}

/* Per-request scratch space the callbacks write into. */
struct xfer {
        struct buf body;
        const struct transport_stream *stream; /* NULL for send() */
        CURL *h;
        int streaming; /* -1 unknown yet, 0 buffering (non-2xx), 1 handing 2xx chunks out */
        bool stopped;  /* the chunk callback asked to stop */
        bool too_big;
        char *content_type;
        long retry_after_s;
        char errbuf[CURL_ERROR_SIZE];
};

/* stream(): decides on the first body byte whether this response is streamed (2xx). */
static bool deliver_chunk(struct xfer *x, const char *p, size_t n, size_t *ret)
{
        long status = 0;

        if (x->streaming < 0) {
                cl()->easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &status);
                x->streaming = status >= 200 && status < 300;
        }
        if (!x->streaming)
                return false;
        if (x->stream->on_chunk(x->stream->arg, p, n) != 0) {
                x->stopped = true;
                *ret = 0; /* makes curl end the transfer with CURLE_WRITE_ERROR */
        } else {
                *ret = n;
        }
        return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
        struct xfer *x = ud;
        size_t r;

        if (x->stream && deliver_chunk(x, p, size * n, &r))
                return r;
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
                n = cl()->slist_append(l, req->headers[i]);
                if (!n)
                        abort();
                l = n;
        }
        n = cl()->slist_append(l, "Expect:"); /* no 100-continue round trip */
        if (!n)
                abort();
        return n;
}

static void set_method(CURL *h, const struct transport_request *req)
{
        if (strcmp(req->method, "GET") == 0) {
                cl()->easy_setopt(h, CURLOPT_HTTPGET, 1L);
                return;
        }
        if (strcmp(req->method, "POST") != 0)
                cl()->easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
        if (req->body || strcmp(req->method, "POST") == 0) {
                cl()->easy_setopt(h, CURLOPT_POSTFIELDS, req->body ? req->body : "");
                cl()->easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        }
}

static void set_options(struct curl_transport *ct,
                        const struct transport_request *req,
                        struct curl_slist *hdrs,
                        struct xfer *x)
{
        CURL *h = ct->h;

        cl()->easy_reset(h); /* keeps live connections: keep-alive survives */
        cl()->easy_setopt(h, CURLOPT_URL, req->url);
        cl()->easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        cl()->easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        cl()->easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)ct->connect_timeout_ms);
        cl()->easy_setopt(h, CURLOPT_TIMEOUT_MS,
                          (long)(req->timeout_ms ? req->timeout_ms : ct->timeout_ms));
        cl()->easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        cl()->easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        cl()->easy_setopt(h, CURLOPT_WRITEDATA, x);
        cl()->easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        cl()->easy_setopt(h, CURLOPT_HEADERDATA, x);
        cl()->easy_setopt(h, CURLOPT_ERRORBUFFER, x->errbuf);
        cl()->easy_setopt(h, CURLOPT_SSL_VERIFYPEER, ct->insecure ? 0L : 1L);
        cl()->easy_setopt(h, CURLOPT_SSL_VERIFYHOST, ct->insecure ? 0L : 2L);
        if (ct->ca_file) {
                /* Only this bundle: without clearing CAPATH, libcurl-gnutls also parses every
                 * certificate under /etc/ssl/certs for each connection (megabytes per
                 * thread). */
                cl()->easy_setopt(h, CURLOPT_CAINFO, ct->ca_file);
                cl()->easy_setopt(h, CURLOPT_CAPATH, NULL);
        }
        if (x->stream) /* a quiet stream (a watch) must notice a dead peer */
                cl()->easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
        if (ct->cert_file) {
                cl()->easy_setopt(h, CURLOPT_SSLCERT, ct->cert_file);
                cl()->easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
        }
        if (ct->key_file) {
                cl()->easy_setopt(h, CURLOPT_SSLKEY, ct->key_file);
                cl()->easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
        }
        set_method(h, req);
}

static int map_curl_error(struct curl_transport *ct, CURLcode rc, const struct xfer *x)
{
        snprintf(ct->base.error, sizeof(ct->base.error), "%s",
                 x->too_big     ? "response body over the size cap"
                 : x->errbuf[0] ? x->errbuf
                                : cl()->easy_strerror(rc));
        if (x->too_big)
                return CM_ETOOBIG;
        if (rc == CURLE_OPERATION_TIMEDOUT)
                return CM_ETIMEDOUT;
        return CM_ETRANSPORT;
}

/* Runs the transfer on the multi handle, checking the stop flag between polls. */
static CURLcode perform_multi(struct curl_transport *ct, const struct transport_stream *s)
{
        CURLcode rc = CURLE_OK;
        CURLMsg *msg;
        int running = 1, left;

        if (!ct->multi)
                ct->multi = cl()->multi_init();
        if (!ct->multi || cl()->multi_add_handle(ct->multi, ct->h) != CURLM_OK)
                return CURLE_OUT_OF_MEMORY;
        while (running) {
                if (cl()->multi_perform(ct->multi, &running) != CURLM_OK) {
                        rc = CURLE_RECV_ERROR;
                        break;
                }
                if (!running || (s->stop && atomic_load_explicit(s->stop, memory_order_acquire)))
                        break;
                (void)cl()->multi_poll(ct->multi, NULL, 0, 100, NULL);
        }
        while ((msg = cl()->multi_info_read(ct->multi, &left)))
                if (msg->msg == CURLMSG_DONE && msg->easy_handle == ct->h)
                        rc = msg->data.result;
        cl()->multi_remove_handle(ct->multi, ct->h);
        return rc;
}

static int do_transfer(struct curl_transport *ct,
                       const struct transport_request *req,
                       const struct transport_stream *s,
                       struct transport_response *resp)
{
        struct xfer x = { .retry_after_s = -1, .stream = s, .h = ct->h, .streaming = -1 };
        struct curl_slist *hdrs = build_headers(req);
        CURLcode rc;
        long status = 0;
        int r;

        buf_init(&x.body, ct->max_body);
        set_options(ct, req, hdrs, &x);
        rc = s ? perform_multi(ct, s) : cl()->easy_perform(ct->h);
        cl()->easy_setopt(ct->h, CURLOPT_HTTPHEADER, NULL);
        cl()->easy_setopt(ct->h, CURLOPT_ERRORBUFFER, NULL); /* x is about to go away */
        cl()->slist_free_all(hdrs);
        if (rc != CURLE_OK && !(x.stopped && rc == CURLE_WRITE_ERROR)) {
                r = map_curl_error(ct, rc, &x);
                goto out;
        }
        cl()->easy_getinfo(ct->h, CURLINFO_RESPONSE_CODE, &status);
        if (status == 0) { /* stopped before any response arrived */
                snprintf(ct->base.error, sizeof(ct->base.error), "stopped before a response");
                r = CM_ETRANSPORT;
                goto out;
        }
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

static int curl_send(struct http_transport *t,
                     const struct transport_request *req,
                     struct transport_response *resp)
{
        return do_transfer(container_of(t, struct curl_transport, base), req, NULL, resp);
}

static int curl_stream(struct http_transport *t,
                       const struct transport_request *req,
                       const struct transport_stream *s,
                       struct transport_response *resp)
{
        return do_transfer(container_of(t, struct curl_transport, base), req, s, resp);
}

static void curl_destroy(struct http_transport *t)
{
        struct curl_transport *ct = container_of(t, struct curl_transport, base);

        cl()->easy_cleanup(ct->h);
        if (ct->multi)
                cl()->multi_cleanup(ct->multi);
        free(ct->ca_file);
        free(ct->cert_file);
        free(ct->key_file);
        free(ct);
}

int http_transport_curl_new(const struct http_transport_opts *o, struct http_transport **ret)
{
        struct curl_transport *ct;
        const char *why = NULL;

        if (!curl_lib_load(&why)) {
                log_error("http", "cannot use libcurl", "reason=%s", why);
                return CM_ETRANSPORT;
        }
        if ((o->ca_file && access(o->ca_file, R_OK) != 0) ||
            (o->client_cert_file && access(o->client_cert_file, R_OK) != 0) ||
            (o->client_key_file && access(o->client_key_file, R_OK) != 0))
                return CM_EINVAL;
        ct = xcalloc(1, sizeof(*ct));
        ct->h = cl()->easy_init();
        if (!ct->h) {
                free(ct);
                return CM_ENOMEM;
        }
        ct->base.send = curl_send;
        ct->base.stream = curl_stream;
        ct->base.destroy = curl_destroy;
        ct->ca_file = o->ca_file ? xstrdup(o->ca_file) : NULL;
        ct->cert_file = o->client_cert_file ? xstrdup(o->client_cert_file) : NULL;
        ct->key_file = o->client_key_file ? xstrdup(o->client_key_file) : NULL;
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
