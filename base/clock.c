/*
 * clock: the system clock (CLOCK_MONOTONIC / CLOCK_REALTIME) and a fake clock for tests,
 * both behind struct clock_ops. Stateless apart from the fake's atomic counter, so every
 * function is thread-safe.
 */
#include "clock.h"

#include <stddef.h>

#include "compiler.h"

#define NS_PER_MS  1000000L
#define NS_PER_SEC 1000000000L
#define MS_PER_SEC 1000U

static uint64_t system_now_ms(UNUSED const struct clock_ops *c)
{
        struct timespec ts;

        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * MS_PER_SEC + (uint64_t)(ts.tv_nsec / NS_PER_MS);
}

static int64_t system_wall_s(UNUSED const struct clock_ops *c)
{
        struct timespec ts;

        (void)clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec;
}

static const struct clock_ops system_clock = {
        .now_ms = system_now_ms,
        .wall_s = system_wall_s,
};

const struct clock_ops *clock_system(void)
{
        return &system_clock;
}

uint64_t clock_now_ms(const struct clock_ops *c)
{
        if (!c)
                c = &system_clock;
        return c->now_ms(c);
}

int64_t clock_wall_s(const struct clock_ops *c)
{
        if (!c)
                c = &system_clock;
        return c->wall_s(c);
}

void clock_deadline_ts(uint64_t ms, struct timespec *ret)
{
        /* A year is far beyond any wait we make and keeps tv_sec arithmetic safe. */
        const uint64_t max_ms = 365ULL * 24 * 3600 * MS_PER_SEC;
        struct timespec ts;

        if (ms > max_ms)
                ms = max_ms;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(ms / MS_PER_SEC);
        ts.tv_nsec += (long)(ms % MS_PER_SEC) * NS_PER_MS;
        if (ts.tv_nsec >= NS_PER_SEC) {
                ts.tv_sec++;
                ts.tv_nsec -= NS_PER_SEC;
        }
        *ret = ts;
}

/* container_of for a const pointer (the macro would cast the qualifier away). */
static const struct clock_fake *fake_of(const struct clock_ops *c)
{
        return (const struct clock_fake *)(const void *)((const char *)c -
                                                         offsetof(struct clock_fake, ops));
}

static uint64_t fake_now_ms(const struct clock_ops *c)
{
        const struct clock_fake *f = fake_of(c);

        return atomic_load_explicit(&f->now_ms, memory_order_acquire);
}

static int64_t fake_wall_s(const struct clock_ops *c)
{
        const struct clock_fake *f = fake_of(c);
        uint64_t now = atomic_load_explicit(&f->now_ms, memory_order_acquire);

        return f->wall_base_s + (int64_t)((now - f->start_ms) / MS_PER_SEC);
}

void clock_fake_init(struct clock_fake *f, uint64_t start_ms, int64_t wall_s)
{
        f->ops.now_ms = fake_now_ms;
        f->ops.wall_s = fake_wall_s;
        f->wall_base_s = wall_s;
        f->start_ms = start_ms;
        atomic_init(&f->now_ms, start_ms);
}

void clock_fake_advance(struct clock_fake *f, uint64_t ms)
{
        atomic_fetch_add_explicit(&f->now_ms, ms, memory_order_acq_rel);
}
