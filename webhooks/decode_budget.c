/*
 * decode_budget: a counting budget with a lock-free fast path (see decode_budget.h). A take
 * that fits is one compare-and-swap; only a take that does not fit locks and waits. A give
 * wakes the waiters only when there are some: a waiter registers before it checks, under
 * the lock it waits with, so a give that sees no waiter happened before that check.
 */
#include "decode_budget.h"

#include <errno.h>
#include <time.h>

#include "err.h"
#include "metrics.h"

void decode_budget_init(struct decode_budget *b, size_t total, unsigned wait_ms)
{
        pthread_condattr_t attr;

        b->total = total;
        b->wait_ms = wait_ms;
        atomic_init(&b->used, 0);
        atomic_init(&b->waiters, 0);
        atomic_init(&b->refused, 0);
        (void)pthread_mutex_init(&b->lock, NULL);
        (void)pthread_condattr_init(&attr);
        (void)pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        (void)pthread_cond_init(&b->freed, &attr);
        (void)pthread_condattr_destroy(&attr);
}

void decode_budget_destroy(struct decode_budget *b)
{
        (void)pthread_cond_destroy(&b->freed);
        (void)pthread_mutex_destroy(&b->lock);
}

/* Takes n when it fits (or when nothing is taken at all); false otherwise. */
static bool try_take(struct decode_budget *b, size_t n)
{
        size_t cur = atomic_load(&b->used);

        while (cur == 0 || (cur <= b->total && n <= b->total - cur)) {
                if (atomic_compare_exchange_weak(&b->used, &cur, cur + n))
                        return true;
        }
        return false;
}

static struct timespec deadline_after(unsigned ms)
{
        struct timespec t;

        (void)clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_sec += ms / 1000;
        t.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (t.tv_nsec >= 1000000000L) {
                t.tv_sec++;
                t.tv_nsec -= 1000000000L;
        }
        return t;
}

int decode_budget_take(struct decode_budget *b, size_t n)
{
        struct timespec deadline;
        bool ok;
        int r = 0;

        if (try_take(b, n))
                return CM_OK;
        deadline = deadline_after(b->wait_ms);
        (void)pthread_mutex_lock(&b->lock);
        atomic_fetch_add(&b->waiters, 1);
        while (!(ok = try_take(b, n)) && r != ETIMEDOUT)
                r = pthread_cond_timedwait(&b->freed, &b->lock, &deadline);
        atomic_fetch_sub(&b->waiters, 1);
        (void)pthread_mutex_unlock(&b->lock);
        if (ok)
                return CM_OK;
        atomic_fetch_add_explicit(&b->refused, 1, memory_order_relaxed);
        if (b->refused_metric)
                metric_counter_inc(b->refused_metric);
        return CM_ETIMEDOUT;
}

void decode_budget_give(struct decode_budget *b, size_t n)
{
        atomic_fetch_sub(&b->used, n);
        if (atomic_load(&b->waiters) == 0)
                return;
        (void)pthread_mutex_lock(&b->lock);
        (void)pthread_cond_broadcast(&b->freed);
        (void)pthread_mutex_unlock(&b->lock);
}
