/*
 * conn_guard: a list of live connections in accept order (head = oldest) under one mutex,
 * per-connection state and deadline in atomics, and a sweeper thread.
 */
#include "conn_guard.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "xalloc.h"

enum conn_state {
        CONN_RECEIVING,
        CONN_BUSY,
        CONN_IDLE,
};

struct conn_entry {
        struct conn_entry *prev;
        struct conn_entry *next;
        int fd;
        unsigned char addr[16]; /* IPv6, or IPv4 mapped; all zero for other families */
        uint64_t accepted_ms;
        _Atomic uint64_t phase_ms;    /* when it began receiving its current request */
        bool shut;                    /* under the list lock */
        _Atomic int state;            /* enum conn_state */
        _Atomic uint64_t deadline_ms; /* UINT64_MAX: none */
        _Atomic bool later;           /* a request has completed on this connection */
};

/* A descriptor admitted and handed to libmicrohttpd that it has not started yet. */
struct handed {
        int fd;
        unsigned char addr[16];
        uint64_t at_ms;
};

struct conn_guard {
        char *name;
        struct conn_guard_opts o;
        uint64_t evict_ms; /* how long a connection receives before it may be evicted */

        pthread_mutex_t lock; /* guards the list, live, every entry's shut and handed */
        struct conn_entry *head;
        struct conn_entry *tail;
        unsigned live;         /* entries not yet shut */
        struct handed *handed; /* unordered; owned */
        size_t n_handed, cap_handed;

        pthread_mutex_t stall_lock; /* held while on_stall runs, and to change it */
        conn_guard_stall_fn *on_stall;
        void *stall_ud;

        pthread_t thread;
        pthread_mutex_t stop_lock;
        pthread_cond_t stop_cond;
        bool stopping;

        _Atomic uint64_t n_open;
        _Atomic uint64_t n_deadline;
        _Atomic uint64_t n_evicted;
        _Atomic uint64_t n_refused;
        _Atomic uint64_t n_per_addr;
        _Atomic uint64_t n_stalled;
};

static void addr_key(const struct sockaddr *sa, socklen_t len, unsigned char out[16])
{
        memset(out, 0, 16);
        if (sa && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
                memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
        } else if (sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
                out[10] = 0xff;
                out[11] = 0xff;
                memcpy(out + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        }
}

/* Under the lock. */
static void shut_entry(struct conn_guard *g, struct conn_entry *e)
{
        e->shut = true;
        g->live--;
        (void)shutdown(e->fd, SHUT_RDWR);
}

/* The oldest entry other than skip that may make room. For the listener (addr NULL): one
 * that has been receiving its request for at least evict_ms (a prompt client is past its
 * headers long before; a young connection is left alone so that a crowd of newcomers
 * cannot push out each other, or a prompt client, as fast as they connect), else an idle
 * one. For one address: an idle one only. A crowd from one address then keeps its share
 * and turns it over at the header deadline; evicting among its own connections would only
 * buy it TLS handshakes, and a newcomer from a crowded address is refused before any.
 * Under the lock. */
static struct conn_entry *oldest_unfinished(struct conn_guard *g,
                                            const unsigned char *addr,
                                            const struct conn_entry *skip)
{
        uint64_t now = clock_now_ms(NULL);
        struct conn_entry *idle = NULL;

        for (struct conn_entry *e = g->head; e; e = e->next) {
                int st;

                if (e == skip || e->shut || (addr && memcmp(e->addr, addr, 16) != 0))
                        continue;
                st = atomic_load_explicit(&e->state, memory_order_relaxed);
                if (!addr && st == CONN_RECEIVING &&
                    now - atomic_load_explicit(&e->phase_ms, memory_order_relaxed) >= g->evict_ms)
                        return e;
                if (st == CONN_IDLE && !idle)
                        idle = e;
        }
        return idle;
}

static unsigned count_address(const struct conn_guard *g, const unsigned char *addr)
{
        unsigned n = 0;

        for (const struct conn_entry *e = g->head; e; e = e->next)
                if (!e->shut && memcmp(e->addr, addr, 16) == 0)
                        n++;
        return n;
}

/* Admitted connections from addr that libmicrohttpd has not started yet. Under the lock. */
static unsigned count_handed(const struct conn_guard *g, const unsigned char *addr)
{
        unsigned n = 0;

        for (size_t i = 0; i < g->n_handed; i++)
                n += memcmp(g->handed[i].addr, addr, 16) == 0;
        return n;
}

/* Drops fd's record, if any. Under the lock. */
static void drop_handed(struct conn_guard *g, int fd)
{
        for (size_t i = 0; i < g->n_handed; i++)
                if (g->handed[i].fd == fd) {
                        g->handed[i] = g->handed[--g->n_handed];
                        return;
                }
}

/* Records fd as handed to libmicrohttpd. Under the lock. */
static void add_handed(struct conn_guard *g, int fd, const unsigned char *addr)
{
        drop_handed(g, fd); /* a descriptor libmicrohttpd closed unstarted, used again */
        if (g->n_handed == g->cap_handed) {
                g->cap_handed = g->cap_handed ? 2 * g->cap_handed : 8;
                g->handed = xrealloc(g->handed, g->cap_handed * sizeof(*g->handed));
        }
        g->handed[g->n_handed] = (struct handed){ .fd = fd, .at_ms = clock_now_ms(NULL) };
        memcpy(g->handed[g->n_handed].addr, addr, 16);
        g->n_handed++;
}

/* Makes room for e (already counted in live): closes the oldest unfinished connection, or e
 * itself when there is none. Under the lock. Returns false when e was closed. */
static bool make_room(struct conn_guard *g, struct conn_entry *e, bool per_address)
{
        struct conn_entry *victim = oldest_unfinished(g, per_address ? e->addr : NULL, e);

        if (per_address)
                atomic_fetch_add_explicit(&g->n_per_addr, 1, memory_order_relaxed);
        if (victim) {
                shut_entry(g, victim);
                atomic_fetch_add_explicit(&g->n_evicted, 1, memory_order_relaxed);
                return true;
        }
        shut_entry(g, e);
        atomic_fetch_add_explicit(&g->n_refused, 1, memory_order_relaxed);
        return false;
}

bool conn_guard_admit(struct conn_guard *g, int fd, const struct sockaddr *addr, socklen_t addr_len)
{
        unsigned char key[16];
        bool ok = true;

        addr_key(addr, addr_len, key);
        pthread_mutex_lock(&g->lock);
        /* the admitted ones libmicrohttpd has not started count: a crowd arrives faster
         * than it starts them */
        if (count_address(g, key) + count_handed(g, key) >= g->o.per_address &&
            !oldest_unfinished(g, key, NULL))
                ok = false;
        else if (g->live + g->n_handed >= g->o.max_connections && !oldest_unfinished(g, NULL, NULL))
                ok = false;
        if (ok)
                add_handed(g, fd, key);
        pthread_mutex_unlock(&g->lock);
        if (!ok)
                atomic_fetch_add_explicit(&g->n_refused, 1, memory_order_relaxed);
        return ok;
}

void conn_guard_unhanded(struct conn_guard *g, int fd)
{
        pthread_mutex_lock(&g->lock);
        drop_handed(g, fd);
        pthread_mutex_unlock(&g->lock);
}

void conn_guard_on_stall(struct conn_guard *g, conn_guard_stall_fn *fn, void *ud)
{
        pthread_mutex_lock(&g->stall_lock);
        g->on_stall = fn;
        g->stall_ud = ud;
        pthread_mutex_unlock(&g->stall_lock);
}

struct conn_entry *conn_guard_open(struct conn_guard *g,
                                   int fd,
                                   const struct sockaddr *addr,
                                   socklen_t addr_len)
{
        struct conn_entry *e = xcalloc(1, sizeof(*e));
        bool ok = true;

        e->fd = fd;
        addr_key(addr, addr_len, e->addr);
        e->accepted_ms = clock_now_ms(NULL);
        atomic_init(&e->phase_ms, e->accepted_ms);
        atomic_init(&e->state, CONN_RECEIVING);
        atomic_init(&e->deadline_ms, e->accepted_ms + g->o.header_ms);
        atomic_init(&e->later, false);

        pthread_mutex_lock(&g->lock);
        drop_handed(g, fd);
        e->prev = g->tail;
        if (g->tail)
                g->tail->next = e;
        else
                g->head = e;
        g->tail = e;
        g->live++;
        if (count_address(g, e->addr) > g->o.per_address)
                ok = make_room(g, e, true);
        if (ok && g->live > g->o.max_connections)
                (void)make_room(g, e, false);
        pthread_mutex_unlock(&g->lock);
        atomic_fetch_add_explicit(&g->n_open, 1, memory_order_relaxed);
        return e;
}

void conn_guard_close(struct conn_guard *g, struct conn_entry *e)
{
        if (!e)
                return;
        pthread_mutex_lock(&g->lock);
        if (e->prev)
                e->prev->next = e->next;
        else
                g->head = e->next;
        if (e->next)
                e->next->prev = e->prev;
        else
                g->tail = e->prev;
        if (!e->shut)
                g->live--;
        pthread_mutex_unlock(&g->lock);
        atomic_fetch_sub_explicit(&g->n_open, 1, memory_order_relaxed);
        free(e);
}

void conn_guard_headers_done(struct conn_guard *g, struct conn_entry *e)
{
        bool later = atomic_load_explicit(&e->later, memory_order_relaxed);
        uint64_t from = later ? clock_now_ms(NULL) : e->accepted_ms;

        atomic_store_explicit(&e->deadline_ms, from + g->o.request_ms, memory_order_relaxed);
        atomic_store_explicit(&e->state, CONN_RECEIVING, memory_order_relaxed);
}

void conn_guard_busy(struct conn_entry *e)
{
        atomic_store_explicit(&e->state, CONN_BUSY, memory_order_relaxed);
        atomic_store_explicit(&e->deadline_ms, UINT64_MAX, memory_order_relaxed);
}

void conn_guard_idle(struct conn_guard *g, struct conn_entry *e)
{
        uint64_t now = clock_now_ms(NULL);

        atomic_store_explicit(&e->later, true, memory_order_relaxed);
        atomic_store_explicit(&e->deadline_ms, now + g->o.idle_ms + g->o.header_ms,
                              memory_order_relaxed);
        atomic_store_explicit(&e->phase_ms, now, memory_order_relaxed);
        atomic_store_explicit(&e->state, CONN_IDLE, memory_order_relaxed);
}

/* Reports the descriptors handed CONN_GUARD_STALL_MS ago or more and not started, each
 * once. */
static void report_stalled(struct conn_guard *g, uint64_t now)
{
        int *fds = NULL;
        size_t n = 0;

        pthread_mutex_lock(&g->lock);
        for (size_t i = 0; i < g->n_handed;) {
                if (now - g->handed[i].at_ms < CONN_GUARD_STALL_MS) {
                        i++;
                        continue;
                }
                if (!fds)
                        fds = xmalloc(g->n_handed * sizeof(*fds));
                fds[n++] = g->handed[i].fd;
                g->handed[i] = g->handed[--g->n_handed];
        }
        pthread_mutex_unlock(&g->lock);
        if (n) {
                atomic_fetch_add_explicit(&g->n_stalled, n, memory_order_relaxed);
                pthread_mutex_lock(&g->stall_lock);
                if (g->on_stall)
                        g->on_stall(g->stall_ud, fds, n);
                pthread_mutex_unlock(&g->stall_lock);
        }
        free(fds);
}

/* Closes every connection past its deadline. */
static void sweep(struct conn_guard *g)
{
        uint64_t now = clock_now_ms(NULL);
        unsigned closed = 0;

        pthread_mutex_lock(&g->lock);
        for (struct conn_entry *e = g->head; e; e = e->next) {
                if (e->shut || atomic_load_explicit(&e->deadline_ms, memory_order_relaxed) > now)
                        continue;
                shut_entry(g, e);
                closed++;
        }
        pthread_mutex_unlock(&g->lock);
        if (closed) {
                atomic_fetch_add_explicit(&g->n_deadline, closed, memory_order_relaxed);
                log_debug("http", "connections closed at their deadline", "server=%s count=%u",
                          g->name, closed);
        }
        report_stalled(g, now);
}

static uint64_t tick_ms(const struct conn_guard *g)
{
        uint64_t t = g->o.header_ms / 10;

        if (t < 5)
                return 5;
        return t > 100 ? 100 : t;
}

static void *sweeper_main(void *arg)
{
        struct conn_guard *g = arg;
        struct timespec deadline;

        pthread_mutex_lock(&g->stop_lock);
        while (!g->stopping) {
                clock_deadline_ts(tick_ms(g), &deadline);
                (void)pthread_cond_timedwait(&g->stop_cond, &g->stop_lock, &deadline);
                if (g->stopping)
                        break;
                pthread_mutex_unlock(&g->stop_lock);
                sweep(g);
                pthread_mutex_lock(&g->stop_lock);
        }
        pthread_mutex_unlock(&g->stop_lock);
        return NULL;
}

int conn_guard_new(const struct conn_guard_opts *opts, struct conn_guard **ret)
{
        struct conn_guard *g = xcalloc(1, sizeof(*g));
        pthread_condattr_t attr;

        g->name = xstrdup(opts->name ? opts->name : "http");
        g->o = *opts;
        g->o.name = g->name;
        g->evict_ms = g->o.header_ms / 5 < 1000 ? g->o.header_ms / 5 : 1000;
        pthread_mutex_init(&g->lock, NULL);
        pthread_mutex_init(&g->stall_lock, NULL);
        pthread_mutex_init(&g->stop_lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&g->stop_cond, &attr);
        pthread_condattr_destroy(&attr);
        if (pthread_create(&g->thread, NULL, sweeper_main, g) != 0) {
                g->stopping = true; /* nothing to join */
                g->thread = pthread_self();
                conn_guard_free(g);
                return CM_EIO;
        }
        (void)pthread_setname_np(g->thread, "connsweep");
        *ret = g;
        return CM_OK;
}

struct conn_guard *conn_guard_free(struct conn_guard *g)
{
        bool join;

        if (!g)
                return NULL;
        pthread_mutex_lock(&g->stop_lock);
        join = !g->stopping;
        g->stopping = true;
        pthread_cond_signal(&g->stop_cond);
        pthread_mutex_unlock(&g->stop_lock);
        if (join)
                pthread_join(g->thread, NULL);
        while (g->head) {
                struct conn_entry *e = g->head;

                g->head = e->next;
                free(e);
        }
        pthread_cond_destroy(&g->stop_cond);
        pthread_mutex_destroy(&g->stop_lock);
        pthread_mutex_destroy(&g->stall_lock);
        pthread_mutex_destroy(&g->lock);
        free(g->handed);
        free(g->name);
        free(g);
        return NULL;
}

void conn_guard_stats(const struct conn_guard *g, struct conn_guard_stats *ret)
{
        *ret = (struct conn_guard_stats){
                .open = atomic_load(&g->n_open),
                .deadline = atomic_load(&g->n_deadline),
                .evicted = atomic_load(&g->n_evicted),
                .refused = atomic_load(&g->n_refused),
                .per_addr = atomic_load(&g->n_per_addr),
                .stalled = atomic_load(&g->n_stalled),
        };
}
