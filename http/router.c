/*
 * router: a frozen table of (path, method) -> handler. Routes are few (tens), so lookup is
 * a linear scan: no hashing, no allocation, no lock once frozen.
 */
#include "router.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "xalloc.h"

#define ROUTER_MAX 64

struct router {
        struct route routes[ROUTER_MAX];
        size_t n;
        bool frozen;
};

int router_new(struct router **ret)
{
        *ret = xcalloc(1, sizeof(struct router));
        return CM_OK;
}

struct router *router_free(struct router *r)
{
        free(r);
        return NULL;
}

int router_add(struct router *r, const struct route *route)
{
        if (r->frozen || !route->path || !route->method || !route->fn)
                return CM_EINVAL;
        for (size_t i = 0; i < r->n; i++)
                if (strcmp(r->routes[i].path, route->path) == 0 &&
                    strcmp(r->routes[i].method, route->method) == 0)
                        return CM_EEXIST;
        if (r->n == ROUTER_MAX)
                return CM_ETOOBIG;
        r->routes[r->n++] = *route;
        return CM_OK;
}

void router_freeze(struct router *r)
{
        r->frozen = true;
}

static bool path_matches(const struct route *route, const char *path)
{
        if (route->flags & ROUTE_PREFIX)
                return strncmp(path, route->path, strlen(route->path)) == 0;
        return strcmp(path, route->path) == 0;
}

enum route_result router_lookup(const struct router *r,
                                const char *path,
                                const char *method,
                                const struct route **ret_route)
{
        bool path_known = false;

        for (size_t i = 0; i < r->n; i++) {
                const struct route *route = &r->routes[i];

                if (!path_matches(route, path))
                        continue;
                path_known = true;
                if (strcmp(route->method, method) == 0) {
                        *ret_route = route;
                        return ROUTE_FOUND;
                }
        }
        return path_known ? ROUTE_METHOD_NOT_ALLOWED : ROUTE_NOT_FOUND;
}

void http_response_error(struct http_response *resp, unsigned status, const char *fmt, ...)
{
        va_list ap;
        char *msg;

        va_start(ap, fmt);
        msg = xvasprintf(fmt, ap);
        va_end(ap);
        free(resp->body);
        resp->status = status;
        resp->content_type = NULL;
        resp->body = xasprintf("%s\n", msg);
        resp->body_len = strlen(resp->body);
        free(msg);
}

int http_response_add_header(struct http_response *resp, const char *name, const char *value)
{
        if (resp->n_headers == ARRAY_SIZE(resp->headers))
                return CM_ETOOBIG;
        resp->headers[resp->n_headers].name = xstrdup(name);
        resp->headers[resp->n_headers].value = xstrdup(value);
        resp->n_headers++;
        return CM_OK;
}

void http_response_release(struct http_response *resp)
{
        for (size_t i = 0; i < resp->n_headers; i++) {
                free(resp->headers[i].name);
                free(resp->headers[i].value);
        }
        free(resp->body);
        *resp = (struct http_response){ 0 };
}

bool http_content_type_is_json(const char *content_type)
{
        static const char json[] = "application/json";
        size_t n = sizeof(json) - 1;

        if (!content_type)
                return false;
        while (*content_type == ' ')
                content_type++;
        if (strncasecmp(content_type, json, n) != 0)
                return false;
        content_type += n;
        while (*content_type == ' ')
                content_type++;
        return *content_type == '\0' || *content_type == ';';
}
