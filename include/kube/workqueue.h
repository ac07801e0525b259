#pragma once
/*
 * workqueue: keyed, de-duplicating, rate-limited work queue (client-go semantics).
 *
 * Keys are strings ("namespace/name", at most WORKQUEUE_MAX_KEY bytes); the queue copies
 * them and owns its copies. The contract, as client-go's:
 *   - keys are handed out in the order they were added (FIFO);
 *   - adding a key that is already waiting is a no-op (N events collapse into one);
 *   - a key is never handed to two workers at once: adding a key that is being processed
 *     marks it dirty, and workqueue_done() puts it back at the tail, exactly once;
 *   - workqueue_add_after() parks a key until a due time on the queue's clock; re-adding it
 *     with a sooner time moves it earlier, a later time keeps the earlier one;
 *   - workqueue_add_rate_limited() = add_after(max(per-key backoff, global token bucket)),
 *     client-go's default controller rate limiter: base 5 ms x 2^failures capped at
 *     1000 s, and a bucket of 10 tokens/s with a burst of 100. workqueue_forget() resets
 *     the key's failure count (call it after a successful reconcile).
 *
 * Delayed keys need no timer thread: workqueue_get() waits on its condvar with a timeout
 * equal to the earliest due time. With a fake clock (clock.h) the wait still runs in real
 * time, so tests advance the clock and then call workqueue_get_timeout(q, 0, ...) (a poll
 * that never sleeps), workqueue_len(), or workqueue_tick() to wake blocked getters.
 *
 * Shutdown (client-go ShutDown, not ShutDownWithDrain): further adds are refused with
 * CM_ESHUTDOWN, delayed keys are dropped, and every blocked getter wakes. Keys already
 * waiting are still handed out, and keys dirtied during processing are still re-queued by
 * workqueue_done(); workqueue_get() returns CM_ESHUTDOWN once nothing is waiting. Workers
 * therefore loop on workqueue_get() until it fails, and the owner joins them before
 * workqueue_free(). The queue does not wait for in-flight keys.
 *
 * Threads: every function except workqueue_new/workqueue_free is thread-safe (one mutex
 * and one CLOCK_MONOTONIC condvar inside; no callbacks, so no lock ordering to respect).
 * Ownership: the controller owns the queue; the clock is borrowed and must outlive it.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"

struct clock_ops;
struct workqueue;

/* Longest accepted key in bytes (namespace 63 + '/' + name 253 fits with room). */
#define WORKQUEUE_MAX_KEY 512

/* Zero fields take the client-go defaults shown. */
struct workqueue_opts {
        uint64_t base_delay_ms;        /* first rate-limited delay (5) */
        uint64_t max_delay_ms;         /* per-key backoff cap (1000000 = 1000 s) */
        uint64_t bucket_qps;           /* token bucket refill, tokens per second (10) */
        uint64_t bucket_burst;         /* token bucket size (100) */
        const struct clock_ops *clock; /* NULL = clock_system(); borrowed */
};

/* A snapshot for metrics (controller-runtime's workqueue_* series). Durations are in
 * milliseconds of the queue's clock. */
struct workqueue_stats {
        uint64_t depth;         /* keys ready and waiting for a worker (workqueue_len) */
        uint64_t delayed;       /* keys parked by add_after / add_rate_limited */
        uint64_t processing;    /* keys handed out and not yet done */
        uint64_t adds_total;    /* adds that were not de-duplicated */
        uint64_t retries_total; /* workqueue_add_rate_limited calls accepted */
        uint64_t queue_count;   /* gets: time from add to get ... */
        uint64_t queue_ms_sum;
        uint64_t queue_ms_max;
        uint64_t work_count; /* dones: time from get to done ... */
        uint64_t work_ms_sum;
        uint64_t work_ms_max;
        uint64_t unfinished_ms; /* sum of (now - get) over keys processing now */
        uint64_t longest_ms;    /* the longest of those */
        uint64_t waiters;       /* threads blocked in workqueue_get right now */
};

/* Creates an empty queue; o may be NULL for all defaults. CM_EINVAL if base > max delay,
 * CM_ENOMEM if the mutex or condvar cannot be created. */
MUST_CHECK int workqueue_new(const struct workqueue_opts *o, struct workqueue **ret);
/* Frees the queue and every key it holds, waiting or delayed. No thread may be using it
 * (shut down and join the workers first). Accepts NULL; returns NULL. */
struct workqueue *workqueue_free(struct workqueue *q);

/* Queues key unless it is already waiting (see above). 0, CM_EINVAL (empty or longer than
 * WORKQUEUE_MAX_KEY), CM_ESHUTDOWN (dropped). */
MUST_CHECK int workqueue_add(struct workqueue *q, const char *key);
/* Queues key once delay_ms have passed on the queue's clock (0 = workqueue_add). Errors as
 * workqueue_add. */
MUST_CHECK int workqueue_add_after(struct workqueue *q, const char *key, uint64_t delay_ms);
/* Counts a failure for key and queues it after the rate limiter's delay. Errors as
 * workqueue_add. */
MUST_CHECK int workqueue_add_rate_limited(struct workqueue *q, const char *key);
/* Resets key's failure count, so its next rate-limited delay is the base delay again. */
void workqueue_forget(struct workqueue *q, const char *key);
/* The number of rate-limited adds of key since it was last forgotten. */
unsigned workqueue_num_requeues(struct workqueue *q, const char *key);

/* Blocks until a key is ready, marks it processing and returns a copy in *ret_key (the
 * caller frees it after workqueue_done()). CM_ESHUTDOWN once shut down and nothing waits. */
MUST_CHECK int workqueue_get(struct workqueue *q, char **ret_key);
/* As workqueue_get, but waits at most timeout_ms of real time; 0 polls without sleeping.
 * CM_ETIMEDOUT when no key became ready in time. */
MUST_CHECK int workqueue_get_timeout(struct workqueue *q, uint64_t timeout_ms, char **ret_key);
/* Ends processing of key (as returned by get). Re-queues it if it was added meanwhile.
 * A key that is not being processed is ignored. */
void workqueue_done(struct workqueue *q, const char *key);

/* The number of keys ready for a worker (moving due delayed keys in first). */
size_t workqueue_len(struct workqueue *q);
/* Moves due delayed keys in and wakes every blocked getter to re-check: for tests that
 * advance a fake clock while other threads block in workqueue_get. */
void workqueue_tick(struct workqueue *q);
/* Starts shutdown (see above) and wakes every blocked getter. Idempotent. */
void workqueue_shutdown(struct workqueue *q);
/* True once workqueue_shutdown() was called. */
bool workqueue_is_shutting_down(struct workqueue *q);
/* Copies the queue's counters into *ret. Walks the keys the queue holds (for the
 * unfinished-work figures), so call it at scrape rate, not per item. */
void workqueue_stats(struct workqueue *q, struct workqueue_stats *ret);
