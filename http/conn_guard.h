#pragma once
/*
 * conn_guard: the live connections of one listener, with absolute deadlines and limits that
 * libmicrohttpd 0.9.75 does not have (its timeout counts only idle time, and a full
 * listener refuses newcomers instead of dropping whoever holds a slot without using it).
 *
 * Every connection is entered when libmicrohttpd starts it (before the TLS handshake) and
 * removed when it closes. A connection is:
 *   RECEIVING  from accept (or the end of its previous request) until its request has
 *              been read: TLS handshake, headers, body;
 *   BUSY       from the end of the upload until the response has been sent;
 *   IDLE       a keep-alive connection between requests.
 * Deadlines (absolute, not reset by traffic):
 *   headers    header_ms from accept; on a keep-alive connection, idle_ms + header_ms from
 *              the end of the previous request;
 *   request    request_ms from accept for the first request, from the end of the headers
 *              for later ones (headers + body, Go's ReadTimeout).
 * A BUSY connection has no deadline here (the handler runs; libmicrohttpd's idle timeout
 * covers a client that stops reading the answer).
 * Limits, applied when a connection is accepted (conn_guard_admit, before libmicrohttpd
 * builds anything) and when it starts:
 *   per_address  past it, the oldest IDLE connection of that address is closed to make
 *                room, else the newcomer is refused;
 *   max_connections  past it, the oldest connection that has been RECEIVING for at least
 *                min(header_ms / 5, 1 s), else the oldest IDLE one, is closed to make room,
 *                else the newcomer is refused.
 * A prompt client is past its headers in milliseconds, so it is never the one evicted, and
 * newcomers cannot evict each other as fast as they connect. A refusal at accept costs an
 * accept and a close, no TLS handshake: that is what keeps a crowd of reconnecting clients
 * cheap.
 * "Closed" means shutdown(fd, SHUT_RDWR): libmicrohttpd sees the end of the stream on its
 * next poll and closes the connection through its usual path (and removes it here). The fd
 * stays valid while the entry exists, because libmicrohttpd reports the close before it
 * closes the descriptor.
 *
 * A sweeper thread closes connections past their deadline (it wakes every tick_ms).
 *
 * It also reports connections handed to libmicrohttpd (conn_guard_admit) that it has not
 * started (conn_guard_open) CONN_GUARD_STALL_MS later. libmicrohttpd 0.9.75's epoll loop
 * can leave an added connection unstarted until its next timeout (up to the idle timeout,
 * 10 s): when one epoll_wait returns a full batch (128 events, a crowd of connections) that
 * includes the wake-up for the addition, it waits again, with the full timeout, before it
 * looks at the added connections, and nothing wakes it. The owner's on_stall wakes it.
 *
 * Threads: new/free/on_stall from the owner; admit/unhanded from the acceptor's thread;
 * conn_guard_open/close from libmicrohttpd's threads (any); the state functions from the
 * thread serving the connection; the stall callback runs on the sweeper's thread. One mutex guards
 * the list; the hot path (state changes) uses atomics only.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "compiler.h"

struct conn_guard;
struct conn_entry;

struct conn_guard_opts {
        const char *name;         /* for logs; copied */
        unsigned max_connections; /* >= 1 */
        unsigned per_address;     /* >= 1 */
        uint64_t header_ms;       /* >= 1 */
        uint64_t request_ms;      /* >= 1 */
        uint64_t idle_ms;         /* keep-alive allowance before the next request's headers */
};

struct conn_guard_stats {
        uint64_t open;     /* connections in the table */
        uint64_t deadline; /* closed at a deadline */
        uint64_t evicted;  /* closed to make room for a newcomer */
        uint64_t refused;  /* newcomers closed because every slot was busy */
        uint64_t per_addr; /* of evicted + refused, because of the per-address limit */
        uint64_t stalled;  /* handed to libmicrohttpd and not started CONN_GUARD_STALL_MS later */
};

/* How long after conn_guard_admit a connection not started is reported as stalled. */
#define CONN_GUARD_STALL_MS 100

/* Called on the sweeper's thread with descriptors (n >= 1) handed to libmicrohttpd more than
 * CONN_GUARD_STALL_MS ago and not started since; each is reported once, and may have been
 * closed or reused meanwhile (the numbers only say which worker to wake). */
typedef void conn_guard_stall_fn(void *ud, const int *fds, size_t n);

/* Starts the sweeper. */
MUST_CHECK int conn_guard_new(const struct conn_guard_opts *opts, struct conn_guard **ret);
/* Stops the sweeper and frees the table (entries still in it are freed too). NULL is fine. */
struct conn_guard *conn_guard_free(struct conn_guard *g);
/* Whether connection fd just accepted from addr may start: false when its address, or the
 * listener, is full (counting the admitted ones not started yet) and nothing could be
 * evicted for it (the caller closes it at once, before any TLS work). On true, fd is
 * recorded as handed to libmicrohttpd: its conn_guard_open is due (the acceptor's thread,
 * before MHD_add_connection). */
bool conn_guard_admit(struct conn_guard *g,
                      int fd,
                      const struct sockaddr *addr,
                      socklen_t addr_len);
/* A new connection on fd from addr (copied); applies the limits. Returns the entry, owned by
 * the guard until conn_guard_close. */
struct conn_entry *conn_guard_open(struct conn_guard *g,
                                   int fd,
                                   const struct sockaddr *addr,
                                   socklen_t addr_len);
/* libmicrohttpd refused fd (and closed it): no start is due. */
void conn_guard_unhanded(struct conn_guard *g, int fd);
/* Sets what the sweeper calls for stalled connections (fn NULL: nothing). When it returns, a
 * previous fn is no longer running and is not called again. */
void conn_guard_on_stall(struct conn_guard *g, conn_guard_stall_fn *fn, void *ud);
/* The connection closed: removes and frees e. NULL is fine. */
void conn_guard_close(struct conn_guard *g, struct conn_entry *e);
/* The headers of the current request are in. */
void conn_guard_headers_done(struct conn_guard *g, struct conn_entry *e);
/* The upload is complete; the request is being answered. */
void conn_guard_busy(struct conn_entry *e);
/* The answer has been sent; the connection may carry another request. */
void conn_guard_idle(struct conn_guard *g, struct conn_entry *e);
void conn_guard_stats(const struct conn_guard *g, struct conn_guard_stats *ret);
