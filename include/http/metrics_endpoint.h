#pragma once
/*
 * metrics_endpoint: GET /metrics, the Prometheus text exposition of a metrics registry
 * (http/metrics_endpoint.c). Add it to a router before the router is frozen; the handler
 * then runs on the listener's threads and renders the registry under its own lock.
 *
 * With an authorizer, every request must carry "Authorization: Bearer <token>" and the
 * authorizer decides, as controller-runtime's WithAuthenticationAndAuthorization filter
 * does: 401 "Unauthorized" without a bearer token or when the token is not authenticated,
 * 403 "Authorization denied for user <name>" when the user may not get the path, 500 when
 * the decision could not be made. The token is only passed on, never logged or kept.
 */

#include <stddef.h>

#include "compiler.h"

struct metrics;
struct router;

enum metrics_auth {
        METRICS_AUTH_ALLOWED,
        METRICS_AUTH_UNAUTHENTICATED, /* 401 */
        METRICS_AUTH_FORBIDDEN,       /* 403 */
        METRICS_AUTH_ERROR,           /* 500: the reviews failed (API server down, timeout) */
};

/* Decides whether the bearer token may `verb` the non-resource URL path. Writes the
 * authenticated user's name (for the 403 text) into user (NUL-terminated, truncated to
 * user_size). Runs on the listener's thread and may block on the network for a bounded
 * time; must be thread-safe when the listener has more than one thread. */
struct metrics_authorizer {
        enum metrics_auth (*check)(void *ud,
                                   const char *token,
                                   const char *verb,
                                   const char *path,
                                   char *user,
                                   size_t user_size);
        void *ud; /* borrowed; outlives the listener */
};

/* Routes GET /metrics on r to a rendering of m (borrowed: m must outlive r's listener). A
 * body past 16 MiB is answered with 500. */
MUST_CHECK int metrics_endpoint_add(struct router *r, struct metrics *m);

/* What a secure route needs; the caller owns it and keeps it (and what it points to)
 * alive as long as the router's listener runs. */
struct metrics_secure {
        struct metrics *m; /* borrowed */
        struct metrics_authorizer authz;
};

/* Routes GET /metrics on r to sec->m behind sec->authz: only the requests it allows get
 * the rendering. */
MUST_CHECK int metrics_endpoint_add_secure(struct router *r, struct metrics_secure *sec);
