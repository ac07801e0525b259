/*
 * http_server: libmicrohttpd glue. Each request gets a context (route, capped body buffer,
 * start time) owned by MHD's per-connection slot and freed in the completion callback.
 * The TLS certificate is chosen per handshake by looking up the accepting socket's local
 * port in a small table of TLS servers, because GnuTLS's retrieve callback carries no user
 * pointer.
 */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "acceptor.h"
#include "buf.h"
#include "certstore.h"
#include "conn_guard.h"
#include "err.h"
#include "log.h"
#include "tls_io.h"
#include "xalloc.h"

#define TLS_SERVERS_MAX 8
#define TARGET_MAX      4096 /* bytes of the raw request target */
#define QUERY_ARGS_MAX  32

/* What the request-target check (on_uri) found, carried to the first access call as the
 * request's context pointer before the context exists. */
static char target_bad;      /* control byte, space or %00 in the path: 400 */
static char target_too_long; /* over TARGET_MAX: 414 */
static char target_too_many; /* over QUERY_ARGS_MAX query arguments: 414 */

struct http_server {
        struct MHD_Daemon *mhd;
        char *name;
        const struct router *router;
        const struct http_observer *observer;
        struct certstore *certs;
        struct conn_guard *guard;
        struct acceptor *acceptor;
        size_t max_body;
        size_t max_in_flight;    /* the bodies' budget */
        atomic_size_t in_flight; /* bytes of bodies held against it */
        uint16_t port;
        unsigned threads; /* libmicrohttpd's workers, >= 1 */
        char *priorities;
        atomic_uint active; /* requests between their first handler call and completion */
};

/* libmicrohttpd's socket context: what this server keeps per connection. */
struct conn_slot {
        struct conn_entry *guard; /* the guard's entry; NULL if none */
        struct tls_io *io;        /* the TLS transport (TLS servers only); owned */
};

struct req_ctx {
        const struct route *route;
        struct conn_entry *conn; /* the connection's guard entry; NULL if none */
        struct buf body;
        struct timespec start;
        bool responded;   /* a response is queued; discard whatever else arrives */
        bool observed;    /* observer->begin was called */
        size_t discarded; /* bytes of an over-cap chunked body thrown away */
        size_t held;      /* bytes of s->in_flight this request holds */
        bool busy;        /* a chunked body found the budget spent: 503 at its end */
        bool head;        /* a HEAD request: its response carries no body */
        unsigned status;
        const char *length; /* the Content-Length value (libmicrohttpd's), NULL if none */
        const char *ctype;  /* the Content-Type value (libmicrohttpd's), NULL if none */
};

/* Local port -> certstore for the TLS servers of this process. */
static struct {
        pthread_mutex_t lock;
        uint16_t port[TLS_SERVERS_MAX];
        struct certstore *certs[TLS_SERVERS_MAX];
} tls_servers = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int tls_servers_set(uint16_t port, struct certstore *cs)
{
        int r = CM_ETOOBIG;

        pthread_mutex_lock(&tls_servers.lock);
        for (size_t i = 0; i < TLS_SERVERS_MAX; i++) {
                if (tls_servers.port[i] == port || (cs && tls_servers.port[i] == 0)) {
                        tls_servers.port[i] = cs ? port : 0;
                        tls_servers.certs[i] = cs;
                        r = CM_OK;
                        break;
                }
        }
        pthread_mutex_unlock(&tls_servers.lock);
        return r;
}

static struct certstore *tls_servers_find(uint16_t port)
{
        struct certstore *cs = NULL;

        pthread_mutex_lock(&tls_servers.lock);
        for (size_t i = 0; i < TLS_SERVERS_MAX; i++)
                if (tls_servers.port[i] == port && tls_servers.certs[i])
                        cs = tls_servers.certs[i];
        pthread_mutex_unlock(&tls_servers.lock);
        return cs;
}

static uint16_t session_local_port(gnutls_session_t session)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        struct tls_io *io = tls_io_of(session);
        int fd = io ? tls_io_fd(io) : -1;

        if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return 0;
        if (ss.ss_family == AF_INET)
                return ntohs(((struct sockaddr_in *)&ss)->sin_port);
        if (ss.ss_family == AF_INET6)
                return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        return 0;
}

static int retrieve_cert(gnutls_session_t session,
                         const gnutls_datum_t *req_ca_rdn,
                         int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos,
                         int pk_algos_length,
                         gnutls_pcert_st **pcert,
                         unsigned int *pcert_length,
                         gnutls_privkey_t *privkey)
{
        struct certstore *cs = tls_servers_find(session_local_port(session));

        (void)req_ca_rdn;
        (void)nreqs;
        (void)pk_algos;
        (void)pk_algos_length;
        if (!cs)
                return -1;
        certstore_current(cs, pcert, pcert_length, privkey);
        return 0;
}

static double seconds_since(const struct timespec *t0)
{
        struct timespec now;

        (void)clock_gettime(CLOCK_MONOTONIC, &now);
        return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static struct conn_slot *connection_slot(struct MHD_Connection *conn);

/* Whether libmicrohttpd sends a body after the headers of this response: then the headers'
 * record can wait for the body's and go out in the same sendmsg (tls_io.h). */
static bool sends_body(const struct req_ctx *ctx, unsigned status, size_t len)
{
        return len > 0 && !ctx->head && status >= 200 && status != 204 && status != 304;
}

static enum MHD_Result queue(struct MHD_Connection *conn,
                             struct req_ctx *ctx,
                             struct http_response *resp,
                             bool close)
{
        struct MHD_Response *r;
        enum MHD_Result ok;
        size_t len = resp->body ? resp->body_len : 0;

        if (!resp->status)
                resp->status = 200;
        if (!resp->body)
                resp->body = xstrdup("");
        r = MHD_create_response_from_buffer_with_free_callback(len, resp->body, free);
        if (!r)
                return MHD_NO;
        resp->body = NULL; /* the MHD response owns it now */
        (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                      resp->content_type ? resp->content_type
                                                         : "text/plain; charset=utf-8");
        for (size_t i = 0; i < resp->n_headers; i++)
                (void)MHD_add_response_header(r, resp->headers[i].name, resp->headers[i].value);
        if (close)
                (void)MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        if (ctx->conn)
                conn_guard_busy(ctx->conn);
        if (sends_body(ctx, resp->status, len)) {
                struct conn_slot *slot = connection_slot(conn);

                if (slot && slot->io)
                        tls_io_coalesce_next(slot->io);
        }
        ok = MHD_queue_response(conn, resp->status, r);
        if (ok != MHD_YES) {
                struct conn_slot *slot = connection_slot(conn);

                if (slot && slot->io)
                        tls_io_flush(slot->io); /* disarms: nothing will follow */
        }
        MHD_destroy_response(r);
        ctx->responded = true;
        ctx->status = resp->status;
        http_response_release(resp);
        return ok;
}

/* Counts n more bytes of ctx's body against the server's budget; false, counting nothing,
 * when they do not fit. */
static bool hold_body(struct http_server *s, struct req_ctx *ctx, size_t n)
{
        size_t was = atomic_fetch_add_explicit(&s->in_flight, n, memory_order_relaxed);

        if (was + n > s->max_in_flight) {
                atomic_fetch_sub_explicit(&s->in_flight, n, memory_order_relaxed);
                return false;
        }
        ctx->held += n;
        return true;
}

static void release_body(struct http_server *s, struct req_ctx *ctx)
{
        atomic_fetch_sub_explicit(&s->in_flight, ctx->held, memory_order_relaxed);
        ctx->held = 0;
        buf_release(&ctx->body);
}

static enum MHD_Result queue_busy(struct MHD_Connection *conn, struct req_ctx *ctx)
{
        struct http_response resp = { 0 };

        http_response_error(&resp, 503,
                            "server busy: too many request bodies in flight; try again");
        (void)!http_response_add_header(&resp, "Retry-After", "1");
        return queue(conn, ctx, &resp, false);
}

static enum MHD_Result queue_error(struct MHD_Connection *conn,
                                   struct req_ctx *ctx,
                                   unsigned status,
                                   const char *msg)
{
        struct http_response resp = { 0 };

        http_response_error(&resp, status, "%s", msg);
        return queue(conn, ctx, &resp, false);
}

/* An answer to a request whose framing cannot be trusted: whatever follows on the
 * connection is not read. */
static enum MHD_Result queue_fatal(struct MHD_Connection *conn,
                                   struct req_ctx *ctx,
                                   unsigned status,
                                   const char *msg)
{
        struct http_response resp = { 0 };

        http_response_error(&resp, status, "%s", msg);
        return queue(conn, ctx, &resp, true);
}

/*
 * The raw request target, before libmicrohttpd splits off and parses the query: 0.9.75
 * stores each argument in the connection's memory pool and, when the pool runs out, leaves
 * the connection hanging until its timeout; so a target with too many arguments has its
 * query cut here (the first argument byte becomes the end of the string, in libmicrohttpd's
 * own writable read buffer) and is answered 414 at the first access call.
 */
/* Bytes on_uri stops at: the end, control bytes, space, DEL, and the three it counts. */
enum { URI_PLAIN, URI_END, URI_BAD, URI_QUERY, URI_PERCENT, URI_AMP };

static unsigned char uri_class(unsigned char c)
{
        if (c == '\0')
                return URI_END;
        if (c <= ' ' || c == 0x7f)
                return URI_BAD;
        return c == '?' ? URI_QUERY : c == '%' ? URI_PERCENT : c == '&' ? URI_AMP : URI_PLAIN;
}

static unsigned char uri_classes[256];
static pthread_once_t uri_classes_once = PTHREAD_ONCE_INIT;

static void uri_classes_init(void)
{
        for (unsigned c = 0; c < 256; c++)
                uri_classes[c] = uri_class((unsigned char)c);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
        const unsigned char *p = (const unsigned char *)uri;
        const char *q = NULL;
        size_t args = 0;
        bool bad = false;

        (void)cls;
        (void)conn;
        (void)pthread_once(&uri_classes_once, uri_classes_init);
        /* one pass, a table lookup a byte: the length, control bytes, a %00 in the path,
         * the query's arguments */
        for (;; p++) {
                unsigned char k = uri_classes[*p];

                if (k == URI_PLAIN)
                        continue;
                if (k == URI_END)
                        break;
                if (k == URI_BAD)
                        bad = true;
                else if (k == URI_QUERY && !q)
                        q = (const char *)p;
                else if (k == URI_PERCENT && !q && p[1] == '0' && p[2] == '0')
                        bad = true;
                else if (k == URI_AMP && q)
                        args++;
        }
        if ((size_t)(p - (const unsigned char *)uri) > TARGET_MAX)
                return &target_too_long;
        if (bad)
                return &target_bad;
        if (q && args + 1 > QUERY_ARGS_MAX) {
                strchr(uri, '?')[1] = '\0'; /* libmicrohttpd's writable buffer (see above) */
                return &target_too_many;
        }
        return NULL;
}

/* libmicrohttpd's own %HH decoding, for the path and each query argument, only where there
 * is a '%' to decode (its default walks every byte). */
static size_t on_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
        (void)cls;
        (void)conn;
        return strchr(s, '%') ? MHD_http_unescape(s) : strlen(s);
}

static bool is_target_mark(const void *p)
{
        return p == &target_bad || p == &target_too_long || p == &target_too_many;
}

struct framing {
        unsigned n_length;
        unsigned n_coding;
        bool has_host;
        bool bad_name;
        const char *length;
        const char *coding;
        const char *ctype;
};

static bool key_is(const char *key, size_t len, const char *name, size_t name_len)
{
        return len == name_len && strncasecmp(key, name, len) == 0;
}

#define KEY_IS(key, len, name) key_is(key, len, name, sizeof(name) - 1)

/* One pass over the header fields (the lengths first: most names match none). */
static enum MHD_Result collect_framing(void *cls,
                                       enum MHD_ValueKind kind,
                                       const char *key,
                                       size_t key_len,
                                       const char *value,
                                       size_t value_len)
{
        struct framing *f = cls;

        (void)kind;
        (void)value_len;
        if (memchr(key, ' ', key_len) || memchr(key, '\t', key_len))
                f->bad_name = true;
        if (KEY_IS(key, key_len, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
                f->n_length++;
                f->length = value;
        } else if (KEY_IS(key, key_len, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
                f->n_coding++;
                f->coding = value;
        } else if (KEY_IS(key, key_len, MHD_HTTP_HEADER_HOST)) {
                f->has_host = true;
        } else if (KEY_IS(key, key_len, MHD_HTTP_HEADER_CONTENT_TYPE) && !f->ctype) {
                f->ctype = value;
        }
        return MHD_YES;
}

static bool length_valid(const char *v)
{
        size_t n = v ? strspn(v, "0123456789") : 0;

        return n >= 1 && n <= 19 && v[n] == '\0';
}

static bool coding_known(const char *t, size_t n)
{
        static const char *const known[] = { "chunked",  "gzip",    "x-gzip",
                                             "compress", "deflate", "identity" };

        for (size_t i = 0; i < ARRAY_SIZE(known); i++)
                if (strlen(known[i]) == n && strncasecmp(t, known[i], n) == 0)
                        return true;
        return false;
}

/* 0: the one coding is "chunked"; 501: a coding we do not know; 400: anything else (known
 * codings we do not take, more than one, an empty element). */
static unsigned coding_verdict(const char *v)
{
        const char *p = v ? v : "";
        unsigned tokens = 0;
        bool chunked = false;

        for (;;) {
                size_t n;

                p += strspn(p, " \t");
                n = strcspn(p, ", \t");
                if (n == 0)
                        return 400;
                if (!coding_known(p, n))
                        return 501;
                tokens++;
                chunked = n == 7 && strncasecmp(p, "chunked", 7) == 0;
                p += n;
                p += strspn(p, " \t");
                if (*p != ',')
                        break;
                p++;
        }
        return *p == '\0' && tokens == 1 && chunked ? 0 : 400;
}

static unsigned fault(const char **msg, const char *why, unsigned status)
{
        *msg = why;
        return status;
}

/* What is wrong with the request line or headers: the status to answer with (0 when
 * nothing is) and *msg, its reason. */
static unsigned framing_fault(struct MHD_Connection *conn,
                              const void *mark,
                              const char *version,
                              struct framing *ret_f,
                              const char **msg)
{
        struct framing f = { 0 };
        unsigned coding;

        if (mark == &target_bad)
                return fault(msg, "bad request: malformed request target", 400);
        if (mark == &target_too_long)
                return fault(msg, "request target too long", 414);
        if (mark == &target_too_many)
                return fault(msg, "too many query arguments", 414);
        (void)MHD_get_connection_values_n(conn, MHD_HEADER_KIND, collect_framing, &f);
        *ret_f = f;
        if (f.bad_name)
                return fault(msg, "bad request: malformed header name", 400);
        if (!f.has_host && version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
                return fault(msg, "bad request: missing Host header", 400);
        if (f.n_coding && f.n_length)
                return fault(msg, "bad request: both Content-Length and Transfer-Encoding", 400);
        if (f.n_length > 1)
                return fault(msg, "bad request: more than one Content-Length", 400);
        if (f.n_length && !length_valid(f.length))
                return fault(msg, "bad request: malformed Content-Length", 400);
        if (f.n_coding > 1)
                return fault(msg, "bad request: more than one Transfer-Encoding", 400);
        coding = f.n_coding ? coding_verdict(f.coding) : 0;
        if (coding == 501)
                return fault(msg, "unsupported transfer coding", 501);
        if (coding)
                return fault(msg, "bad request: Transfer-Encoding must be chunked", 400);
        return 0;
}

/* The checks on the request line and headers; answers and returns true when one fails. */
static bool reject_framing(struct MHD_Connection *conn,
                           struct req_ctx *ctx,
                           const void *mark,
                           const char *version,
                           enum MHD_Result *ret)
{
        const char *msg = NULL;
        struct framing f = { 0 };
        unsigned status = framing_fault(conn, mark, version, &f, &msg);

        ctx->length = f.length;
        ctx->ctype = f.ctype;
        if (!status)
                return false;
        *ret = queue_fatal(conn, ctx, status, msg);
        return true;
}

/* The declared body size: 0 without Content-Length, SIZE_MAX when it is not a number. */
static size_t content_length(const char *cl)
{
        unsigned long long n;
        char *end;

        if (!cl)
                return 0;
        errno = 0;
        n = strtoull(cl, &end, 10);
        if (errno != 0 || *end != '\0' || n > SIZE_MAX)
                return SIZE_MAX;
        return (size_t)n;
}

/* First call for a request: route it and apply every check that needs no body. */
static enum MHD_Result begin_request(struct http_server *s,
                                     struct MHD_Connection *conn,
                                     struct req_ctx *ctx,
                                     const char *url,
                                     const char *method)
{
        size_t declared;

        switch (router_lookup(s->router, url, method, &ctx->route)) {
        case ROUTE_NOT_FOUND:
                return queue_error(conn, ctx, 404, "404 page not found");
        case ROUTE_METHOD_NOT_ALLOWED:
                return queue_error(conn, ctx, 405, "405 method not allowed");
        case ROUTE_FOUND:
                break;
        }
        if (s->observer && s->observer->begin) {
                s->observer->begin(s->observer->ud, ctx->route->path);
                ctx->observed = true;
        }
        declared = content_length(ctx->length);
        if (declared > s->max_body)
                return queue_error(conn, ctx, 413, "request body too large");
        if ((ctx->route->flags & ROUTE_JSON_BODY) && !http_content_type_is_json(ctx->ctype))
                return queue_error(conn, ctx, 415,
                                   "unsupported media type: Content-Type must be "
                                   "application/json");
        if (declared && !hold_body(s, ctx, declared))
                return queue_busy(conn, ctx);
        buf_init(&ctx->body, s->max_body);
        if (declared)
                (void)!buf_reserve(&ctx->body, declared); /* cannot fail: declared <= max */
        return MHD_YES;
}

static enum MHD_Result finish_request(struct MHD_Connection *conn,
                                      struct req_ctx *ctx,
                                      const char *url,
                                      const char *method)
{
        struct http_response resp = { 0 };
        struct http_request req = {
                .method = method,
                .path = url,
                .content_type = ctx->ctype,
                .body = ctx->body.data ? ctx->body.data : "",
                .body_len = ctx->body.len,
                .conn = conn,
        };

        if (ctx->conn)
                conn_guard_busy(ctx->conn);
        ctx->route->fn(ctx->route->ud, &req, &resp);
        return queue(conn, ctx, &resp, false);
}

/*
 * A body without Content-Length (chunked) that passes the cap cannot be answered at once:
 * libmicrohttpd accepts a response only before or after the body. The rest is read and
 * thrown away, never stored, and 413 goes out when the body ends; a client that keeps
 * sending past a second cap's worth is disconnected. A chunked body that finds the budget of
 * bodies in flight spent is thrown away the same way and answered 503 at its end.
 */
static enum MHD_Result take_upload(struct http_server *s,
                                   struct req_ctx *ctx,
                                   const char *data,
                                   size_t *size)
{
        size_t n = *size;

        *size = 0;
        if (!ctx->discarded && ctx->body.len + n > ctx->held &&
            !hold_body(s, ctx, ctx->body.len + n - ctx->held))
                ctx->busy = true;
        else if (!ctx->discarded && buf_append(&ctx->body, data, n) == 0)
                return MHD_YES;
        release_body(s, ctx);
        ctx->discarded += n;
        return ctx->discarded > s->max_body ? MHD_NO : MHD_YES;
}

static struct conn_slot *connection_slot(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *info =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

static struct conn_entry *connection_entry(struct MHD_Connection *conn)
{
        struct conn_slot *slot = connection_slot(conn);

        return slot ? slot->guard : NULL;
}

/* libmicrohttpd calls CLOSED after it has deinitialised the TLS session, so the transport
 * can go with the slot. */
static void on_connection(void *cls,
                          struct MHD_Connection *conn,
                          void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code)
{
        struct http_server *s = cls;
        struct conn_slot *slot = *socket_ctx;
        const union MHD_ConnectionInfo *fd;
        const union MHD_ConnectionInfo *addr;
        const union MHD_ConnectionInfo *tls;
        socklen_t len = 0;

        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (slot) {
                        conn_guard_close(s->guard, slot->guard);
                        slot->io = tls_io_free(slot->io);
                        free(slot);
                }
                *socket_ctx = NULL;
                return;
        }
        fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        addr = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (addr && addr->client_addr && addr->client_addr->sa_family == AF_UNIX) {
                *socket_ctx = NULL; /* a wake-up (wake_worker): no slot, not counted */
                return;
        }
        if (addr && addr->client_addr)
                len = addr->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                               : sizeof(struct sockaddr_in);
        slot = xcalloc(1, sizeof(*slot));
        if (fd)
                slot->guard = conn_guard_open(s->guard, fd->connect_fd,
                                              addr ? addr->client_addr : NULL, len);
        /* Every TLS session gets the transport (retrieve_cert relies on it); without a
         * descriptor (never seen) its reads fail and the connection closes. */
        tls = s->certs ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION) : NULL;
        if (tls && tls->tls_session)
                slot->io = tls_io_attach(tls->tls_session, fd ? fd->connect_fd : -1);
        *socket_ctx = slot;
}

/* The acceptor's thread, for each new socket, before libmicrohttpd builds anything for it:
 * a refusal costs an accept and a close. */
static void on_accepted(void *ud, int fd, const struct sockaddr *addr, socklen_t addr_len)
{
        struct http_server *s = ud;

        if (!conn_guard_admit(s->guard, fd, addr, addr_len)) {
                close(fd);
                return;
        }
        /* On failure libmicrohttpd has closed the socket (and said why in its log). */
        if (MHD_add_connection(s->mhd, fd, addr, addr_len) != MHD_YES)
                conn_guard_unhanded(s->guard, fd);
}

/* A descriptor for socket sk that libmicrohttpd's pool of n workers gives to the worker it
 * gave like to (the first with room, from descriptor mod n): sk, or a duplicate of it with
 * the same remainder (sk closed); sk when none comes within a few tries. */
static int same_worker_fd(int sk, int like, unsigned n)
{
        for (int tries = 0; n > 1 && tries < 8 && (unsigned)sk % n != (unsigned)like % n; tries++) {
                unsigned gap = ((unsigned)like % n + n - (unsigned)sk % n) % n;
                int d = fcntl(sk, F_DUPFD_CLOEXEC, sk + (int)gap);

                if (d < 0)
                        break;
                close(sk);
                sk = d;
        }
        return sk;
}

/* Wakes the worker that holds like (conn_guard.h says why): a connection added to it wakes
 * it, and it starts the ones waiting too. This one is a socket pair's end whose peer is
 * already closed, so it ends at its first read; on_connection gives it no slot. */
static void wake_worker(struct http_server *s, int like)
{
        struct sockaddr_un un = { .sun_family = AF_UNIX };
        int sp[2];

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) < 0)
                return;
        close(sp[1]);
        (void)MHD_add_connection(s->mhd, same_worker_fd(sp[0], like, s->threads),
                                 (struct sockaddr *)&un, sizeof(un));
}

/* The sweeper's thread: one wake-up for each worker that holds a stalled connection. */
static void on_stall(void *ud, const int *fds, size_t n)
{
        struct http_server *s = ud;
        for (size_t i = 0; i < n; i++) {
                size_t j = 0;

                while (j < i && (unsigned)fds[j] % s->threads != (unsigned)fds[i] % s->threads)
                        j++;
                if (j == i) /* the first for its worker */
                        wake_worker(s, fds[i]);
        }
        log_debug("http", "libmicrohttpd woken for connections it had not started",
                  "server=%s count=%zu", s->name, n);
}

static enum MHD_Result on_request(void *cls,
                                  struct MHD_Connection *conn,
                                  const char *url,
                                  const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_data_size,
                                  void **req_cls)
{
        struct http_server *s = cls;
        struct req_ctx *ctx = *req_cls;

        if (!ctx || is_target_mark(ctx)) {
                const void *mark = ctx;
                enum MHD_Result r;

                ctx = xcalloc(1, sizeof(*ctx));
                (void)clock_gettime(CLOCK_MONOTONIC, &ctx->start);
                ctx->head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
                ctx->conn = connection_entry(conn);
                if (ctx->conn)
                        conn_guard_headers_done(s->guard, ctx->conn);
                *req_cls = ctx;
                atomic_fetch_add_explicit(&s->active, 1, memory_order_relaxed);
                if (reject_framing(conn, ctx, mark, version, &r))
                        return r;
                return begin_request(s, conn, ctx, url, method);
        }
        if (ctx->responded) {
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (*upload_data_size)
                return take_upload(s, ctx, upload_data, upload_data_size);
        if (ctx->busy)
                return queue_busy(conn, ctx);
        if (ctx->discarded)
                return queue_error(conn, ctx, 413, "request body too large");
        return finish_request(conn, ctx, url, method);
}

static void on_completed(void *cls,
                         struct MHD_Connection *conn,
                         void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct http_server *s = cls;
        struct req_ctx *ctx = *req_cls;
        struct conn_slot *slot = connection_slot(conn);

        (void)toe;
        if (slot && slot->io)
                tls_io_flush(slot->io);
        if (slot && slot->guard)
                conn_guard_idle(s->guard, slot->guard);
        if (!ctx || is_target_mark(ctx)) {
                *req_cls = NULL;
                return;
        }
        if (ctx->observed && s->observer->end)
                s->observer->end(s->observer->ud, ctx->route->path,
                                 ctx->responded ? ctx->status : 499, seconds_since(&ctx->start));
        release_body(s, ctx);
        free(ctx);
        *req_cls = NULL;
        atomic_fetch_sub_explicit(&s->active, 1, memory_order_release);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        struct http_server *s = cls;
        char *msg;

        if (LOG_DEBUG > atomic_load_explicit(&log_max_level, memory_order_relaxed))
                return;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        msg = xvasprintf(fmt, ap);
#pragma GCC diagnostic pop
        msg[strcspn(msg, "\n")] = '\0';
        log_debug("http", "libmicrohttpd", "server=%s detail=%s", s->name, msg);
        free(msg);
}

bool http_request_query(const struct http_request *req, const char *name, const char **ret_value)
{
        const char *value = NULL;
        size_t value_len = 0;

        if (!req->conn)
                return false;
        if (MHD_lookup_connection_value_n(req->conn, MHD_GET_ARGUMENT_KIND, name, strlen(name),
                                          &value, &value_len) != MHD_YES)
                return false;
        *ret_value = value;
        return true;
}

const char *http_request_header(const struct http_request *req, const char *name)
{
        return req->conn ? MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name) : NULL;
}

struct query_collect {
        const char *name;
        const char **values;
        size_t max;
        size_t n;
};

static enum MHD_Result collect_arg(void *cls,
                                   enum MHD_ValueKind kind,
                                   const char *key,
                                   const char *value)
{
        struct query_collect *qc = cls;

        (void)kind;
        if (strcmp(key, qc->name) == 0 && value && qc->n < qc->max)
                qc->values[qc->n++] = value;
        return MHD_YES;
}

size_t http_request_query_all(const struct http_request *req,
                              const char *name,
                              const char **ret_values,
                              size_t max)
{
        struct query_collect qc = { .name = name, .values = ret_values, .max = max };

        if (req->conn)
                (void)MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, collect_arg, &qc);
        return qc.n;
}

static int resolve_host(const char *host,
                        uint16_t port,
                        struct sockaddr_storage *ret,
                        char **reterr)
{
        struct addrinfo hints = { .ai_flags = AI_NUMERICSERV | AI_PASSIVE,
                                  .ai_socktype = SOCK_STREAM };
        struct addrinfo *res = NULL;
        char service[8];
        int rc;

        (void)snprintf(service, sizeof(service), "%u", port);
        rc = getaddrinfo(host, service, &hints, &res);
        if (rc != 0 || !res) {
                *reterr = xasprintf("cannot resolve listen address \"%s\": %s", host,
                                    gai_strerror(rc));
                return CM_EINVAL;
        }
        memcpy(ret, res->ai_addr, res->ai_addrlen);
        freeaddrinfo(res);
        return CM_OK;
}

static char *priorities_for(enum tls_version min, const char *ciphers)
{
        return xasprintf("%s%s",
                         min == TLS_VERSION_13 ? "NORMAL:-VERS-ALL:+VERS-TLS1.3"
                                               : "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2",
                         ciphers ? ciphers : "");
}

/* The acceptor owns the listening socket (see acceptor.h); libmicrohttpd gets each
 * connection through MHD_add_connection, which its ITC makes safe from that thread. */
static unsigned server_flags(const struct http_server_opts *o)
{
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                         MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;

        if (o->certs)
                flags |= MHD_USE_TLS;
        return flags;
}

static int open_listener(struct http_server *s, const struct http_server_opts *o, char **reterr)
{
        bool any_host = !o->host || !*o->host;
        struct sockaddr_storage addr = { 0 };
        char *err = NULL;
        int r;

        if (!any_host) {
                r = resolve_host(o->host, o->port, &addr, reterr);
                if (r < 0)
                        return r;
        }
        r = acceptor_new(any_host ? NULL : (struct sockaddr *)&addr,
                         addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                    : sizeof(struct sockaddr_in),
                         o->port, &s->acceptor, &err);
        if (r < 0) {
                *reterr = xasprintf("%s server: cannot listen on %s:%u: %s", s->name,
                                    any_host ? "*" : o->host, o->port, err ? err : "error");
                free(err);
                return r;
        }
        s->port = acceptor_port(s->acceptor);
        return CM_OK;
}

static int start_daemon(struct http_server *s, const struct http_server_opts *o, char **reterr)
{
        unsigned threads = s->threads;
        unsigned max_conn = o->max_connections ? o->max_connections : 1024;
        struct MHD_OptionItem opts[20];
        size_t n = 0;

        opts[n++] =
                (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s };
        opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)mhd_log, s };
        /* The guard keeps max_conn; libmicrohttpd's own limit (split among the pool's threads,
         * and refusing rather than evicting) only has to stay out of its way. */
        opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT,
                                             2 * max_conn + 16 * threads, NULL };
        opts[n++] =
                (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s };
        opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, s };
        opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)on_unescape,
                                             NULL };
        opts[n++] = (struct MHD_OptionItem){
                MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                (intptr_t)(o->connection_memory_limit ? o->connection_memory_limit : 8192), NULL
        };
        opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT,
                                             o->read_timeout_s ? o->read_timeout_s : 10, NULL };
        if (threads > 1)
                opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, threads, NULL };
        if (o->certs) {
                s->priorities = priorities_for(o->tls_min, o->tls_ciphers);
                opts[n++] =
                        (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0, s->priorities };
        }
        opts[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };

        /* The certificate callback goes as a variadic argument: a function pointer may not
         * be stored in the option array's void *. */
        if (o->certs)
                s->mhd = MHD_start_daemon(server_flags(o), 0, NULL, NULL, on_request, s,
                                          MHD_OPTION_ARRAY, opts, MHD_OPTION_HTTPS_CERT_CALLBACK,
                                          retrieve_cert, MHD_OPTION_END);
        else
                s->mhd = MHD_start_daemon(server_flags(o), 0, NULL, NULL, on_request, s,
                                          MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
        if (!s->mhd) {
                *reterr = xasprintf("%s server: cannot start: %s", s->name, strerrordesc_np(errno));
                return CM_EIO;
        }
        return CM_OK;
}

static int start_guard(struct http_server *s, const struct http_server_opts *o)
{
        unsigned max_conn = o->max_connections ? o->max_connections : 1024;
        uint64_t read_ms = o->read_timeout_ms
                                   ? o->read_timeout_ms
                                   : 1000u * (uint64_t)(o->read_timeout_s ? o->read_timeout_s : 10);
        uint64_t header_ms = o->read_header_timeout_ms ? o->read_header_timeout_ms : 5000;
        struct conn_guard_opts g = {
                .name = s->name,
                .max_connections = max_conn,
                .per_address =
                        o->max_connections_per_address ? o->max_connections_per_address : max_conn,
                .header_ms = header_ms < read_ms ? header_ms : read_ms,
                .request_ms = read_ms,
                .idle_ms = 1000u * (uint64_t)(o->read_timeout_s ? o->read_timeout_s : 10),
        };

        return conn_guard_new(&g, &s->guard);
}

int http_server_start(const struct http_server_opts *o, struct http_server **ret, char **reterr)
{
        struct http_server *s = xcalloc(1, sizeof(*s));
        int r;

        s->name = xstrdup(o->name ? o->name : "http");
        s->threads = o->threads ? o->threads : 1;
        s->router = o->router;
        s->observer = o->observer;
        s->certs = o->certs;
        s->max_body = o->max_body_bytes ? o->max_body_bytes : 8u << 20;
        s->max_in_flight =
                o->max_body_bytes_in_flight ? o->max_body_bytes_in_flight : 16 * s->max_body;
        r = start_guard(s, o);
        if (r < 0) {
                *reterr = xasprintf("%s server: cannot start the connection sweeper", s->name);
                goto fail;
        }
        r = open_listener(s, o, reterr);
        if (r < 0)
                goto fail;
        if (o->certs && tls_servers_set(s->port, o->certs) < 0) {
                *reterr = xasprintf("%s server: too many TLS listeners", s->name);
                r = CM_ETOOBIG;
                goto fail;
        }
        r = start_daemon(s, o, reterr);
        if (r == 0)
                conn_guard_on_stall(s->guard, on_stall, s);
        if (r == 0 && acceptor_start(s->acceptor, on_accepted, s) < 0) {
                *reterr = xasprintf("%s server: cannot start the accept thread", s->name);
                r = CM_EIO;
        }
        if (r < 0)
                goto fail;
        *ret = s;
        return CM_OK;
fail:
        http_server_free(s);
        return r;
}

uint16_t http_server_port(const struct http_server *s)
{
        return s->port;
}

unsigned http_server_open_connections(const struct http_server *s)
{
        struct conn_guard_stats st;

        conn_guard_stats(s->guard, &st);
        return (unsigned)st.open;
}

uint64_t http_server_stalled_connections(const struct http_server *s)
{
        struct conn_guard_stats st;

        conn_guard_stats(s->guard, &st);
        return st.stalled;
}

void http_server_quiesce(struct http_server *s)
{
        if (s->acceptor)
                acceptor_stop(s->acceptor);
}

bool http_server_wait_idle(struct http_server *s, uint64_t timeout_ms)
{
        struct timespec step = { .tv_nsec = 10 * 1000000L };

        for (uint64_t waited = 0;; waited += 10) {
                if (atomic_load_explicit(&s->active, memory_order_acquire) == 0)
                        return true;
                if (waited >= timeout_ms)
                        return false;
                (void)nanosleep(&step, NULL);
        }
}

struct http_server *http_server_free(struct http_server *s)
{
        if (!s)
                return NULL;
        s->acceptor = acceptor_free(s->acceptor);
        if (s->guard)
                conn_guard_on_stall(s->guard, NULL, NULL); /* no wake-up past this */
        if (s->mhd)
                MHD_stop_daemon(s->mhd);
        s->guard = conn_guard_free(s->guard);
        if (s->certs && s->port)
                (void)tls_servers_set(s->port, NULL);
        free(s->priorities);
        free(s->name);
        free(s);
        return NULL;
}
