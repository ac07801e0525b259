/*
 * acceptor: poll(listen fd, stop pipe); accept4 until EAGAIN; hand over. A descriptor limit
 * (EMFILE, ENFILE) or a memory shortage pauses accepting for a moment instead of spinning.
 */
#include "acceptor.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "xalloc.h"

#define BACKLOG 4096

struct acceptor {
        int fd;
        int stop_pipe[2];
        uint16_t port;
        acceptor_fn *fn;
        void *ud;
        pthread_t thread;
        bool running;
};

static int listen_on(const struct sockaddr *addr, socklen_t len, char **reterr)
{
        int one = 1;
        int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        if (fd < 0) {
                *reterr = xasprintf("socket: %s", strerrordesc_np(errno));
                return -1;
        }
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (addr->sa_family == AF_INET6) {
                int zero = 0;

                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        }
        if (bind(fd, addr, len) < 0 || listen(fd, BACKLOG) < 0) {
                *reterr = xasprintf("%s", strerrordesc_np(errno));
                close(fd);
                return -1;
        }
        return fd;
}

static uint16_t bound_port(int fd)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
                return 0;
        if (ss.ss_family == AF_INET6)
                return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int acceptor_new(const struct sockaddr *addr,
                 socklen_t addr_len,
                 uint16_t port,
                 struct acceptor **ret,
                 char **reterr)
{
        struct acceptor *a = xcalloc(1, sizeof(*a));

        a->stop_pipe[0] = a->stop_pipe[1] = -1;
        if (addr) {
                a->fd = listen_on(addr, addr_len, reterr);
        } else {
                struct sockaddr_in6 any6 = { .sin6_family = AF_INET6,
                                             .sin6_port = htons(port),
                                             .sin6_addr = IN6ADDR_ANY_INIT };
                struct sockaddr_in any4 = { .sin_family = AF_INET,
                                            .sin_port = htons(port),
                                            .sin_addr.s_addr = htonl(INADDR_ANY) };
                char *err6 = NULL;

                a->fd = listen_on((struct sockaddr *)&any6, sizeof(any6), &err6);
                if (a->fd < 0)
                        a->fd = listen_on((struct sockaddr *)&any4, sizeof(any4), reterr);
                free(err6);
        }
        if (a->fd < 0 || pipe2(a->stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
                if (a->fd >= 0)
                        *reterr = xasprintf("pipe: %s", strerrordesc_np(errno));
                acceptor_free(a);
                return CM_EIO;
        }
        a->port = bound_port(a->fd);
        *ret = a;
        return CM_OK;
}

uint16_t acceptor_port(const struct acceptor *a)
{
        return a->port;
}

/* Accepts until the queue is empty; false when accepting must pause. */
static bool drain(struct acceptor *a)
{
        for (;;) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                int fd = accept4(a->fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);

                if (fd >= 0) {
                        a->fn(a->ud, fd, (struct sockaddr *)&ss, len);
                        continue;
                }
                if (errno == EINTR || errno == ECONNABORTED)
                        continue;
                return errno == EAGAIN; /* EWOULDBLOCK is the same on Linux */
        }
}

static void *accept_main(void *arg)
{
        struct acceptor *a = arg;
        int pause_ms = -1;

        for (;;) {
                struct pollfd p[2] = { { .fd = a->stop_pipe[0], .events = POLLIN },
                                       { .fd = a->fd, .events = POLLIN } };

                /* After a pause, poll the listening socket again only once it is over. */
                if (poll(p, pause_ms < 0 ? 2 : 1, pause_ms) < 0 && errno != EINTR)
                        break;
                if (p[0].revents)
                        break;
                pause_ms = -1;
                if (p[1].revents && !drain(a))
                        pause_ms = 50;
        }
        return NULL;
}

int acceptor_start(struct acceptor *a, acceptor_fn *fn, void *ud)
{
        a->fn = fn;
        a->ud = ud;
        if (pthread_create(&a->thread, NULL, accept_main, a) != 0)
                return CM_EIO;
        (void)pthread_setname_np(a->thread, "accept");
        a->running = true;
        return CM_OK;
}

void acceptor_stop(struct acceptor *a)
{
        if (a->running) {
                (void)!write(a->stop_pipe[1], "x", 1);
                pthread_join(a->thread, NULL);
                a->running = false;
        }
        if (a->fd >= 0) {
                close(a->fd);
                a->fd = -1;
        }
}

struct acceptor *acceptor_free(struct acceptor *a)
{
        if (!a)
                return NULL;
        acceptor_stop(a);
        for (int i = 0; i < 2; i++)
                if (a->stop_pipe[i] >= 0)
                        close(a->stop_pipe[i]);
        free(a);
        return NULL;
}
