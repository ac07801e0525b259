#pragma once
/*
 * acceptor: a listening socket and the thread that accepts from it, for http_server.
 *
 * libmicrohttpd 0.9.75 accepts at most ten connections per turn of its event loop; under a
 * crowd of reconnecting clients the kernel's accept queue grows to hundreds, and a prompt
 * client waits behind all of them. This thread drains the queue at every wake-up and hands
 * each socket to a callback, which refuses it (close) or passes it to libmicrohttpd.
 *
 * Threads: start and stop from the owner; the callback runs on the acceptor's thread.
 */

#include <stdint.h>
#include <sys/socket.h>

#include "compiler.h"

struct acceptor;

/* Takes ownership of fd (connected, non-blocking, close-on-exec). */
typedef void acceptor_fn(void *ud, int fd, const struct sockaddr *addr, socklen_t addr_len);

/* Binds and listens: on addr (addr_len bytes), or when addr is NULL on every address
 * (IPv6 dual stack, else IPv4) at port (0 = any). *reterr (malloc'd) says why it failed. */
MUST_CHECK int acceptor_new(const struct sockaddr *addr,
                            socklen_t addr_len,
                            uint16_t port,
                            struct acceptor **ret,
                            char **reterr);
/* The bound port. */
uint16_t acceptor_port(const struct acceptor *a);
/* Starts accepting; fn(ud, …) gets every connection. */
MUST_CHECK int acceptor_start(struct acceptor *a, acceptor_fn *fn, void *ud);
/* Stops accepting and closes the listening socket (connections waiting in the kernel's
 * queue are reset). Idempotent. */
void acceptor_stop(struct acceptor *a);
/* Stops and frees. NULL is fine. */
struct acceptor *acceptor_free(struct acceptor *a);
