#pragma once
/*
 * decode_budget: the bytes of cJSON trees being built at once, across every server thread.
 * A request takes the estimate of its tree (json_scan_tree_bytes) before it parses and
 * gives it back once the tree is freed; when the budget is spent, it waits up to wait_ms for
 * others to finish and is then refused (the caller answers 429 with Retry-After). One
 * request larger than the whole budget is let through when nothing else is in flight, so
 * every review within the per-request limits is served eventually.
 *
 * Threads: take and give from any thread; init and destroy with no request in flight.
 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"

struct metric_series;

struct decode_budget {
        size_t total;
        unsigned wait_ms;
        atomic_size_t used;
        atomic_uint waiters;
        atomic_ulong refused;                 /* takes that timed out, since init */
        struct metric_series *refused_metric; /* counts them too; borrowed, NULL = none */
        pthread_mutex_t lock;
        pthread_cond_t freed; /* CLOCK_MONOTONIC */
};

void decode_budget_init(struct decode_budget *b, size_t total, unsigned wait_ms);
void decode_budget_destroy(struct decode_budget *b);
/* CM_OK when n bytes were taken, CM_ETIMEDOUT when they could not be within wait_ms. */
MUST_CHECK int decode_budget_take(struct decode_budget *b, size_t n);
void decode_budget_give(struct decode_budget *b, size_t n);
