#pragma once
/*
 * tls_io: the GnuTLS transport of one server connection, in place of GnuTLS's own recv and
 * sendmsg on the socket, to cut the system calls per request (docs/performance.md, "HTTPS
 * server"):
 *
 *   read ahead  GnuTLS reads a record in two calls (its 5-byte header, then the rest); each
 *               read here asks the kernel for TLS_IO_READ_AHEAD bytes (GnuTLS asks for a
 *               record's 5-byte header first), in one recv, and serves the next reads from
 *               them. A request that
 *               fits in the read-ahead costs one recv instead of two. Bytes held here are
 *               never lost to edge-triggered polling: libmicrohttpd 0.9.75 forgets that a
 *               connection is readable only when a read returns EAGAIN, and a read returns
 *               EAGAIN only when nothing is held here and the socket is empty.
 *   coalesce    libmicrohttpd 0.9.75 sends a response's headers and body as two records, two
 *               sendmsg calls. After tls_io_coalesce_next, the next record (when small) is
 *               kept and goes out with the record after it, in one send. It is used only
 *               for a response with a body, whose body libmicrohttpd sends right after the
 *               headers: a kept record is always followed by a send that carries it (a short
 *               or refused write keeps the rest here and makes GnuTLS try again, which calls
 *               back here). tls_io_flush sends whatever is still kept, as a backstop.
 *   no cork     libmicrohttpd 0.9.75 corks a connection's socket (TCP_CORK) at its first
 *               response and then, after every response, pushes it with a setsockopt of
 *               TCP_NODELAY (no option turns this off; it does not know the socket's state).
 *               That system call was 3 % of a webhook request's CPU (docs/performance.md).
 *               An attached socket has TCP_NODELAY set once and is never corked: this
 *               module defines the process's setsockopt, which answers TCP_CORK and
 *               TCP_NODELAY for an attached socket without a system call and passes
 *               everything else, and every other socket, to the kernel.
 *
 * Threads: attach from the thread that sets up the connection; everything else from the
 * thread serving it (libmicrohttpd's, for this connection), which is also the only caller of
 * the GnuTLS session.
 */

#include <stdint.h>

#include <gnutls/gnutls.h>

#define TLS_IO_READ_AHEAD 4096  /* bytes read beyond what GnuTLS asks for */
#define TLS_IO_KEEP_MAX   1024  /* largest record kept to be coalesced with the next */
#define TLS_IO_FD_MAX     65536 /* sockets past this number keep libmicrohttpd's cork */
#define TLS_IO_SEND_BLOCK 4096  /* records sent together are copied into one buffer up to this */

struct tls_io;

/* System calls made so far (for tests and diagnostics). */
struct tls_io_stats {
        uint64_t reads; /* readv calls, EAGAIN included */
        uint64_t sends; /* sendmsg/send calls */
};

/* Installs the transport for session on fd (which it does not own). The session keeps
 * pointing at the returned object: free it only after the session is deinitialised. */
struct tls_io *tls_io_attach(gnutls_session_t session, int fd);
/* NULL is fine. */
struct tls_io *tls_io_free(struct tls_io *io);
/* The tls_io of a session set up by tls_io_attach. */
struct tls_io *tls_io_of(gnutls_session_t session);
int tls_io_fd(const struct tls_io *io);
/* Keep the next record if it is small, to send it with the one after it. */
void tls_io_coalesce_next(struct tls_io *io);
/* Sends what is kept (non-blocking; what does not go stays kept) and stops coalescing. */
void tls_io_flush(struct tls_io *io);
void tls_io_stats(const struct tls_io *io, struct tls_io_stats *ret);
