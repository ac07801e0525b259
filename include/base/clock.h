#pragma once
/*
 * clock: an injectable clock, so time-driven code (work queue delays, backoff, informer
 * resync, lease expiry) can be tested without sleeping.
 *
 * Production code takes a `const struct clock_ops *` (NULL meaning clock_system()) and reads
 * time only through it. Tests embed a struct clock_fake and pass &fake.ops:
 *
 *     struct clock_fake fc;
 *     clock_fake_init(&fc, 1000, 1700000000);
 *     workqueue_new(&(struct workqueue_opts){ .clock = &fc.ops }, &q);
 *     clock_fake_advance(&fc, 250);          (now_ms() is 1250 for every reader)
 *
 * Ownership: a clock is borrowed by its users and must outlive them. Thread-safety: every
 * function here may be called from any thread; the fake clock's time is atomic, so one
 * thread may advance it while others read it.
 */

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

struct clock_ops {
        /* Monotonic milliseconds from an arbitrary origin; never goes backwards. */
        uint64_t (*now_ms)(const struct clock_ops *c);
        /* Wall-clock seconds since the Unix epoch (for timestamps people read). */
        int64_t (*wall_s)(const struct clock_ops *c);
};

/* The process clock: CLOCK_MONOTONIC for now_ms, CLOCK_REALTIME for wall_s. Static. */
const struct clock_ops *clock_system(void);

/* c->now_ms(c), or the system clock's when c is NULL. */
uint64_t clock_now_ms(const struct clock_ops *c);
/* c->wall_s(c), or the system clock's when c is NULL. */
int64_t clock_wall_s(const struct clock_ops *c);

/* Absolute CLOCK_MONOTONIC time `ms` milliseconds from now (always real time), for
 * pthread_cond_timedwait() on a condvar created with pthread_condattr_setclock(
 * CLOCK_MONOTONIC). Saturates instead of overflowing. */
void clock_deadline_ts(uint64_t ms, struct timespec *ret);

/* A clock that moves only when told to. Fields are private; pass &f->ops. */
struct clock_fake {
        struct clock_ops ops;
        _Atomic uint64_t now_ms;
        int64_t wall_base_s; /* wall_s() at now_ms == start_ms */
        uint64_t start_ms;
};

/* Starts the fake at now_ms = start_ms, wall_s = wall_s. */
void clock_fake_init(struct clock_fake *f, uint64_t start_ms, int64_t wall_s);
/* Moves both readings forward by ms (wall time by whole elapsed seconds). */
void clock_fake_advance(struct clock_fake *f, uint64_t ms);
