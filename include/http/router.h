#pragma once
/*
 * router: maps a request path (query ignored) and method to a handler. Built by main before
 * any listener starts, then frozen and shared read-only by every server thread, so lookups
 * take no lock.
 *
 * A handler gets the whole, size-capped request body and fills a response; it runs on a
 * server thread and must not block on the network.
 */

#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"

struct router;

struct http_header {
        char *name;  /* owned */
        char *value; /* owned */
};

/* Everything a handler may read; valid only during the call. */
struct http_request {
        const char *method;       /* "GET", "POST", … */
        const char *path;         /* URL path, query removed */
        const char *content_type; /* NULL when absent */
        const char *body;         /* NUL-terminated; "" when no body */
        size_t body_len;
        void *conn; /* private to the server: query lookups */
};

/* What a handler answers. The handler sets status and, optionally, body (malloc'd, owned by
 * the response from then on) and headers; the server frees everything. */
struct http_response {
        unsigned status;          /* 200 when the handler leaves it 0 */
        const char *content_type; /* static string; NULL means "text/plain; charset=utf-8" */
        char *body;               /* owned; NULL for an empty body */
        size_t body_len;
        struct http_header headers[8];
        size_t n_headers;
};

typedef void http_handler_fn(void *ud, const struct http_request *req, struct http_response *resp);

enum route_flags {
        ROUTE_JSON_BODY = 1 << 0, /* 415 unless Content-Type is application/json */
        ROUTE_PREFIX = 1 << 1,    /* path matches any path that starts with it */
};

enum route_result {
        ROUTE_FOUND,
        ROUTE_NOT_FOUND,          /* 404 */
        ROUTE_METHOD_NOT_ALLOWED, /* 405 */
};

struct route {
        const char *path;   /* borrowed; must outlive the router */
        const char *method; /* borrowed */
        http_handler_fn *fn;
        void *ud; /* borrowed */
        unsigned flags;
};

MUST_CHECK int router_new(struct router **ret);
struct router *router_free(struct router *r);
/* Adds a route (copied). CM_EEXIST if path and method are already routed. Not after
 * router_freeze(). */
MUST_CHECK int router_add(struct router *r, const struct route *route);
/* Makes the router read-only; from now on lookups are safe from any thread. */
void router_freeze(struct router *r);
/* Finds the route for path and method. *ret_route is set only for ROUTE_FOUND. */
enum route_result router_lookup(const struct router *r,
                                const char *path,
                                const char *method,
                                const struct route **ret_route);
/* Looks up a query parameter. Returns true when present (with or without a value) and sets
 * *ret_value to its value (NULL for "?verbose"). Implemented by the server. */
bool http_request_query(const struct http_request *req, const char *name, const char **ret_value);
/* Collects up to max values of a repeated query parameter (?exclude=a&exclude=b); returns
 * how many were stored. Implemented by the server. */
size_t http_request_query_all(const struct http_request *req,
                              const char *name,
                              const char **ret_values,
                              size_t max);
/* The value of request header name (case-insensitive), or NULL; borrowed for the call.
 * Implemented by the server. */
const char *http_request_header(const struct http_request *req, const char *name);
/* Fills resp with the plain-text error the server sends for status (404, 405, 413, 415, …). */
void http_response_error(struct http_response *resp, unsigned status, const char *fmt, ...)
        PRINTF_LIKE(3, 4);
/* Adds a header (copied) to resp; CM_ETOOBIG past the fixed header capacity. */
MUST_CHECK int http_response_add_header(struct http_response *resp,
                                        const char *name,
                                        const char *value);
/* Frees what a response owns and zeroes it. */
void http_response_release(struct http_response *resp);
/* True when the content type is application/json (parameters such as charset allowed). */
bool http_content_type_is_json(const char *content_type);
