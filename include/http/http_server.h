#pragma once
/*
 * http_server: an HTTP/1.1 listener on libmicrohttpd, plain or TLS (GnuTLS), serving a
 * frozen router. One type serves the webhooks (TLS, thread pool) and the health and
 * metrics endpoints (plain, one thread).
 *
 * Limits, all enforced before memory is spent: connection count, per-connection memory
 * (headers), request body (a larger Content-Length is answered 413 without reading the body;
 * a chunked body is cut off at the cap), idle timeout (a half-open or silent connection is
 * dropped). TLS: 1.2 and 1.3 only (or 1.3 only); the certificate comes from a certstore at
 * every handshake, so rotations need no restart.
 *
 * Hostile clients (docs/performance.md, "Hostile clients"): two absolute deadlines, not reset
 * by traffic: accept to the end of the headers (read_header_timeout_ms) and accept to the end
 * of the body (read_timeout_ms; on a keep-alive connection both count from the end of the
 * previous request, after the idle allowance). At most max_connections_per_address
 * connections from one address (past it, that address's oldest idle connection makes room,
 * else the newcomer is refused) and max_connections in all (past it, the oldest connection
 * that has been reading its request for a while, else the oldest idle one, makes room, else
 * the newcomer is refused). Refusals happen at accept, on our own accept thread, before any
 * TLS work (http/conn_guard.h, http/acceptor.h).
 *
 * Strict framing, checked before any body is read; each answer closes the connection:
 * Content-Length and Transfer-Encoding together, two Content-Length fields (even equal), a
 * Content-Length that is not 1-19 digits, two Transfer-Encoding fields or one other than
 * "chunked" -> 400 (501 for a coding we do not know); a header name with white space, an
 * HTTP/1.1 request without Host -> 400; a raw target with a control byte or space, or a path
 * with "%00" -> 400; a target over 4096 bytes or with more than 32 query arguments -> 414.
 * libmicrohttpd answers a Content-Length that is not digits itself (400, or 413 past 2^64);
 * 0.9.75 writes that answer's header block twice (its error path re-enters the reply state);
 * it still closes the connection.
 *
 * Routing: 404 unknown path, 405 known path with another method, 415 when a
 * ROUTE_JSON_BODY route gets a non-JSON Content-Type. The query string is ignored by
 * routing (the API server appends ?timeout=10s).
 *
 * Threads: start, quiesce and free from one owner thread; handlers and observers run on
 * server threads and must be thread-safe.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"
#include "router.h"

enum tls_version {
        TLS_VERSION_12, /* "VersionTLS12" (default) */
        TLS_VERSION_13, /* "VersionTLS13" */
};

struct certstore;
struct http_server;

/* Called around every routed request (unrouted ones are not observed, which keeps label
 * cardinality bounded). path is the route's path. */
struct http_observer {
        void (*begin)(void *ud, const char *path);
        void (*end)(void *ud, const char *path, unsigned status, double seconds);
        void *ud;
};

struct http_server_opts {
        const char *name;        /* for logs: "webhook", "health", "metrics" */
        const char *host;        /* NULL or "" = every address (dual stack) */
        uint16_t port;           /* 0 = pick a free port */
        struct certstore *certs; /* borrowed; NULL = plain HTTP */
        enum tls_version tls_min;
        const char *tls_ciphers;              /* GnuTLS priority items appended to the version's
                                                 (":-KX-ALL:+ECDHE-RSA:…"); NULL = NORMAL's suites */
        unsigned threads;                     /* 0 = 1 */
        unsigned max_connections;             /* 0 = 1024 */
        size_t connection_memory_limit;       /* 0 = 8 KiB */
        size_t max_body_bytes;                /* 0 = 8 MiB */
        size_t max_body_bytes_in_flight;      /* 0 = 16 x max_body_bytes: see below */
        unsigned read_timeout_s;              /* 0 = 10: idle limit, and read_timeout_ms' default */
        uint64_t read_timeout_ms;             /* 0 = read_timeout_s: accept to end of body */
        uint64_t read_header_timeout_ms;      /* 0 = 5000 (at most read_timeout_ms) */
        unsigned max_connections_per_address; /* 0 = max_connections */
        const struct router *router;          /* borrowed, frozen, outlives the server */
        const struct http_observer *observer; /* borrowed; may be NULL */
};

/*
 * Bodies in flight: every body being received counts against one budget of the server, its
 * declared Content-Length from the end of its headers (a chunked body: the bytes stored so
 * far) until its request completes. A request that would take the budget past
 * max_body_bytes_in_flight is answered 503 with Retry-After: 1 before its body is read (a
 * chunked one when it ends; its bytes are not stored), so the bodies held at once never
 * pass the budget however many connections send them.
 */

/* Binds and starts serving. *reterr (malloc'd) says why it failed: bind error, bad host. */
MUST_CHECK int http_server_start(const struct http_server_opts *opts,
                                 struct http_server **ret,
                                 char **reterr);
/* The bound port (useful with port 0). */
uint16_t http_server_port(const struct http_server *s);
/* Connections open now (including those closed at a deadline that libmicrohttpd has not
 * finished closing). Any thread. */
unsigned http_server_open_connections(const struct http_server *s);
/* Connections libmicrohttpd had not started CONN_GUARD_STALL_MS (100 ms) after they were
 * handed to it; each time, its worker was woken (http/conn_guard.h says why). Any thread. */
uint64_t http_server_stalled_connections(const struct http_server *s);
/* Stops accepting new connections; requests in flight continue. */
void http_server_quiesce(struct http_server *s);
/* Waits until no request is in flight or timeout_ms passes; true when idle. Idle keep-alive
 * connections do not count (http_server_free closes them), as Go's http.Server.Shutdown
 * treats them: a client that finds one closed sends its next request elsewhere. */
bool http_server_wait_idle(struct http_server *s, uint64_t timeout_ms);
/* Stops the server (closing whatever is still open) and frees it. Accepts NULL. */
struct http_server *http_server_free(struct http_server *s);
