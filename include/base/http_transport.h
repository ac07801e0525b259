#pragma once
/*
 * http_transport: the seam between our HTTP clients (MAAS, later Kubernetes) and libcurl
 * (c-style.md §6.8). A client builds a transport_request, calls t->send() and reads a
 * transport_response; tests can put a fake behind the same struct.
 *
 * Ownership: the caller owns the transport (http_transport_free) and every response
 * (transport_response_release). Threads: a transport is used by ONE thread at a time and
 * never shared (libcurl's rule for easy handles); each worker thread creates its own.
 * http_transport_curl_new() loads and initialises libcurl on first use (curl_lib.h), so a
 * process that never creates one never maps libcurl.
 *
 * Names: router.h owns struct http_request/http_response (the server side), hence the
 * transport_* names here.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

struct transport_request {
        const char *method;         /* "GET", "POST", "PUT", "DELETE" */
        const char *url;            /* absolute http:// or https:// URL */
        const char *const *headers; /* "Name: value" lines, borrowed */
        size_t n_headers;
        const void *body; /* NULL = no body */
        size_t body_len;
        uint32_t timeout_ms; /* total deadline; 0 = the transport's default */
};

struct transport_response {
        long status; /* HTTP status */
        char *body;  /* owned, NUL-terminated (never NULL after a successful send) */
        size_t body_len;
        char *content_type; /* owned; NULL when absent */
        long retry_after_s; /* integer Retry-After header in seconds; -1 when absent */
};

/* Receives the body of a streamed 2xx response chunk by chunk, on the sending thread, as
 * the bytes arrive (chunk boundaries are arbitrary). Return 0 to go on, non-zero to end
 * the transfer (stream() then returns 0). */
typedef int (*transport_chunk_fn)(void *arg, const char *data, size_t n);

struct transport_stream {
        transport_chunk_fn on_chunk;
        void *arg;
        const atomic_bool *stop; /* polled at least every 100 ms; NULL = never */
};

struct http_transport {
        /* 0 = a response arrived (any status) and *resp is filled; < 0 = CM_ETRANSPORT
         * (connect/TLS/protocol), CM_ETIMEDOUT or CM_ETOOBIG (body over the cap), with
         * *resp untouched and a human-readable reason in error[]. */
        int (*send)(struct http_transport *t,
                    const struct transport_request *req,
                    struct transport_response *resp);
        /* Like send(), but a 2xx body is handed to s->on_chunk instead of being buffered
         * (resp->body is then ""); a non-2xx body is buffered as usual (capped). Returns 0
         * when the server ended the body, the callback asked to stop or *s->stop became
         * true; resp->status is filled in every case. NULL in transports that cannot
         * stream (CM_EUNSUPPORTED for callers). */
        int (*stream)(struct http_transport *t,
                      const struct transport_request *req,
                      const struct transport_stream *s,
                      struct transport_response *resp);
        void (*destroy)(struct http_transport *t);
        char error[256]; /* last failure's reason (never contains headers or bodies) */
};

struct http_transport_opts {
        const char *ca_file;          /* PEM bundle to trust instead of the system CAs; copied */
        const char *client_cert_file; /* PEM, for TLS client auth, or NULL; copied */
        const char *client_key_file;  /* PEM key of client_cert_file or NULL; copied */
        bool insecure_skip_verify;    /* turn TLS verification off (explicit opt-in only) */
        uint32_t connect_timeout_ms;  /* 0 = 5000 */
        uint32_t timeout_ms;          /* default total deadline per request; 0 = 30000 */
        size_t max_body;              /* response body cap in bytes; 0 = 8 MiB */
};

/* Creates a libcurl transport: one easy handle reused across requests (keep-alive),
 * CURLOPT_NOSIGNAL, http/https only, TLS verification on unless insecure_skip_verify.
 * CM_EINVAL for an unreadable ca_file, client_cert_file or client_key_file. Supports
 * stream() (via a private multi handle, so the stop flag is polled between waits). */
MUST_CHECK int http_transport_curl_new(const struct http_transport_opts *o,
                                       struct http_transport **ret);
/* Destroys any transport; accepts NULL; returns NULL. */
struct http_transport *http_transport_free(struct http_transport *t);
/* Frees what a response owns and resets it (status 0, retry_after_s -1). */
void transport_response_release(struct transport_response *r);
