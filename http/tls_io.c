/*
 * tls_io: see tls_io.h. A read goes into a per-thread scratch block with one recv; GnuTLS
 * gets what it asked for and the rest is copied to the connection (exactly its size, freed
 * once consumed), so an idle connection holds nothing. A kept record is copied likewise and
 * freed once it is out; it leaves with the next records in one send, from a per-thread send
 * block when they fit.
 */
#include "tls_io.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "xalloc.h"

#define IOV_MAX_PUSH 32 /* records GnuTLS hands over at once (its queue is 32 deep) */

struct tls_io {
        int fd;              /* borrowed */
        bool coalesce;       /* keep the next small record */
        unsigned char *kept; /* a record waiting for the next one, or what a short write left
                              * of it; owned */
        size_t kept_len;
        unsigned char *ahead; /* read beyond what GnuTLS asked for; owned */
        size_t ahead_pos;
        size_t ahead_len;
        struct tls_io_stats stats;
};

static _Thread_local unsigned char scratch[TLS_IO_READ_AHEAD];
static _Thread_local unsigned char send_block[TLS_IO_SEND_BLOCK];

static size_t take_ahead(struct tls_io *io, void *data, size_t len)
{
        size_t n = io->ahead_len - io->ahead_pos;

        if (n > len)
                n = len;
        memcpy(data, io->ahead + io->ahead_pos, n);
        io->ahead_pos += n;
        if (io->ahead_pos == io->ahead_len) {
                free(io->ahead);
                io->ahead = NULL;
                io->ahead_pos = io->ahead_len = 0;
        }
        return n;
}

static ssize_t recv_some(struct tls_io *io, void *buf, size_t len)
{
        ssize_t n;

        do
                n = recv(io->fd, buf, len, 0);
        while (n < 0 && errno == EINTR);
        io->stats.reads++;
        return n;
}

/* A read GnuTLS asks for: from what is held, else one recv into the thread's scratch block
 * (a plain recv: readv costs the kernel an iovec import and the file layer), the rest held;
 * a read as large as the block goes straight into GnuTLS's buffer. */
static ssize_t io_pull(gnutls_transport_ptr_t p, void *data, size_t len)
{
        struct tls_io *io = p;
        ssize_t n;

        if (io->ahead)
                return (ssize_t)take_ahead(io, data, len);
        if (len >= sizeof(scratch))
                return recv_some(io, data, len);
        n = recv_some(io, scratch, sizeof(scratch));
        if (n <= 0)
                return n;
        if ((size_t)n <= len) {
                memcpy(data, scratch, (size_t)n);
                return n;
        }
        memcpy(data, scratch, len);
        io->ahead_len = (size_t)n - len;
        io->ahead_pos = 0;
        io->ahead = xmalloc(io->ahead_len);
        memcpy(io->ahead, scratch + len, io->ahead_len);
        return (ssize_t)len;
}

static int io_pull_timeout(gnutls_transport_ptr_t p, unsigned int ms)
{
        struct tls_io *io = p;
        struct pollfd pfd = { .fd = io->fd, .events = POLLIN };

        if (io->ahead)
                return 1;
        return poll(&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

static ssize_t send_bytes(struct tls_io *io, const void *buf, size_t len)
{
        ssize_t r;

        do
                r = send(io->fd, buf, len, MSG_NOSIGNAL);
        while (r < 0 && errno == EINTR);
        io->stats.sends++;
        return r;
}

/* One send of iov: a plain send for one buffer, or for several that fit the thread's send
 * block (copied there: sendmsg costs the kernel a msghdr and an iovec import), else sendmsg. */
static ssize_t send_iov(struct tls_io *io, struct iovec *iov, int n)
{
        struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)n };
        size_t total = 0;
        ssize_t r;

        if (n == 1)
                return send_bytes(io, iov[0].iov_base, iov[0].iov_len);
        for (int i = 0; i < n; i++)
                total += iov[i].iov_len;
        if (total <= sizeof(send_block)) {
                total = 0;
                for (int i = 0; i < n; i++) {
                        memcpy(send_block + total, iov[i].iov_base, iov[i].iov_len);
                        total += iov[i].iov_len;
                }
                return send_bytes(io, send_block, total);
        }
        do
                r = sendmsg(io->fd, &msg, MSG_NOSIGNAL);
        while (r < 0 && errno == EINTR);
        io->stats.sends++;
        return r;
}

static size_t iov_total(const giovec_t *iov, int n)
{
        size_t total = 0;

        for (int i = 0; i < n; i++)
                total += iov[i].iov_len;
        return total;
}

/* Sends what is kept followed by iov; returns the bytes of iov that went (-1 with errno
 * EAGAIN when only kept bytes did, or none). */
static ssize_t push_after_kept(struct tls_io *io, const giovec_t *iov, int iovcnt)
{
        struct iovec v[1 + IOV_MAX_PUSH];
        int n = iovcnt < IOV_MAX_PUSH ? iovcnt : IOV_MAX_PUSH;
        ssize_t r;

        v[0] = (struct iovec){ .iov_base = io->kept, .iov_len = io->kept_len };
        for (int i = 0; i < n; i++)
                v[1 + i] = (struct iovec){ .iov_base = iov[i].iov_base, .iov_len = iov[i].iov_len };
        r = send_iov(io, v, 1 + n);
        if (r < 0)
                return r;
        if ((size_t)r < io->kept_len) {
                memmove(io->kept, io->kept + r, io->kept_len - (size_t)r);
                io->kept_len -= (size_t)r;
                errno = EAGAIN;
                return -1;
        }
        r -= (ssize_t)io->kept_len;
        free(io->kept);
        io->kept = NULL;
        io->kept_len = 0;
        if (r == 0) {
                errno = EAGAIN;
                return -1;
        }
        return r;
}

static ssize_t io_push(gnutls_transport_ptr_t p, const giovec_t *iov, int iovcnt)
{
        struct tls_io *io = p;
        struct iovec v[IOV_MAX_PUSH];
        int n = iovcnt < IOV_MAX_PUSH ? iovcnt : IOV_MAX_PUSH;
        size_t total = iov_total(iov, iovcnt);

        if (io->coalesce && !io->kept && total > 0 && total <= TLS_IO_KEEP_MAX) {
                io->coalesce = false;
                io->kept = xmalloc(total);
                for (int i = 0; i < iovcnt; i++) {
                        memcpy(io->kept + io->kept_len, iov[i].iov_base, iov[i].iov_len);
                        io->kept_len += iov[i].iov_len;
                }
                return (ssize_t)total;
        }
        io->coalesce = false;
        if (io->kept)
                return push_after_kept(io, iov, iovcnt);
        for (int i = 0; i < n; i++)
                v[i] = (struct iovec){ .iov_base = iov[i].iov_base, .iov_len = iov[i].iov_len };
        return send_iov(io, v, n);
}

/*
 * libmicrohttpd's cork and push (see tls_io.h, "no cork"): the sockets of attached
 * connections, marked by descriptor. A mark is set when a connection is attached and cleared
 * when it is freed, which libmicrohttpd does (its connection-closed notice) before it closes
 * the descriptor, so a number the kernel hands out again is never marked for its new owner.
 */
static _Atomic unsigned char marked[TLS_IO_FD_MAX];

static bool is_marked(int fd)
{
        return fd >= 0 && fd < TLS_IO_FD_MAX &&
               atomic_load_explicit(&marked[fd], memory_order_acquire);
}

static void mark(int fd, bool on)
{
        if (fd >= 0 && fd < TLS_IO_FD_MAX) /* cleared before the descriptor is closed */
                atomic_store_explicit(&marked[fd], on, memory_order_release);
}

static int raw_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
        return (int)syscall(SYS_setsockopt, fd, level, name, val, len);
}

/* The process's setsockopt (it takes libc's place for every caller): TCP_CORK and
 * TCP_NODELAY asked for a marked socket are answered without a system call, so the socket
 * stays as attached left it (uncorked, TCP_NODELAY on: a send goes out at once, and turning
 * TCP_NODELAY off would hold it back, as nothing would turn it on again); anything else goes
 * to the kernel. */
int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
        if (level == IPPROTO_TCP && (name == TCP_CORK || name == TCP_NODELAY) && is_marked(fd))
                return 0;
        return raw_setsockopt(fd, level, name, val, len);
}

struct tls_io *tls_io_attach(gnutls_session_t session, int fd)
{
        static const int on = 1;
        struct tls_io *io = xcalloc(1, sizeof(*io));

        /* never corked, always pushed: each send leaves at once (a response's records are
         * already one send, see coalesce) */
        if (fd >= 0 && raw_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)) == 0)
                mark(fd, true);
        io->fd = fd;
        gnutls_transport_set_ptr(session, io);
        gnutls_transport_set_pull_function(session, io_pull);
        gnutls_transport_set_pull_timeout_function(session, io_pull_timeout);
        gnutls_transport_set_vec_push_function(session, io_push);
        return io;
}

struct tls_io *tls_io_free(struct tls_io *io)
{
        if (!io)
                return NULL;
        mark(io->fd, false);
        free(io->kept);
        free(io->ahead);
        free(io);
        return NULL;
}

struct tls_io *tls_io_of(gnutls_session_t session)
{
        return gnutls_transport_get_ptr(session);
}

int tls_io_fd(const struct tls_io *io)
{
        return io->fd;
}

void tls_io_coalesce_next(struct tls_io *io)
{
        io->coalesce = true;
}

void tls_io_flush(struct tls_io *io)
{
        static const int on = 1;
        ssize_t r;

        io->coalesce = false;
        if (!io->kept)
                return;
        do
                r = send(io->fd, io->kept, io->kept_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (r < 0 && errno == EINTR);
        io->stats.sends++;
        if (r <= 0)
                return;
        if ((size_t)r < io->kept_len) {
                memmove(io->kept, io->kept + r, io->kept_len - (size_t)r);
                io->kept_len -= (size_t)r;
        } else {
                free(io->kept);
                io->kept = NULL;
                io->kept_len = 0;
        }
        /* libmicrohttpd corks the socket and pushes after its own sends; push this too. */
        (void)setsockopt(io->fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

void tls_io_stats(const struct tls_io *io, struct tls_io_stats *ret)
{
        *ret = io->stats;
}
