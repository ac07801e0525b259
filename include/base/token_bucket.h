#pragma once
/*
 * token_bucket: a process-wide request budget (client-go's and golang.org/x/time/rate's
 * token bucket) shared by every client of one server: --kube-api-qps/--kube-api-burst for
 * the Kubernetes API, --maas-api-qps/--maas-api-burst for the MAAS region.
 *
 * A caller reserves a token under the mutex and then sleeps, outside the lock, for the delay
 * it was given; the bucket may go negative, so later callers queue behind earlier ones and
 * the rate the server sees never exceeds qps after the first burst. A server that answers
 * "slow down" (429/503 with Retry-After) holds the whole bucket: no reservation is served
 * before the hold ends, whichever client asks.
 *
 * Ownership: created once by the process and borrowed by its clients, which it must
 * outlive. Threads: every function may be called from any thread.
 */
#include <stdint.h>

#include "compiler.h"

struct clock_ops;
struct metrics;
struct token_bucket;

/* A bucket of `burst` tokens (0 = 1) refilled at `qps` per second on `clock` (NULL = the
 * system clock). qps <= 0 means unlimited: every reservation is free. CM_EINVAL for NaN. */
MUST_CHECK int token_bucket_new(double qps,
                                unsigned burst,
                                const struct clock_ops *clock,
                                struct token_bucket **ret);
/* Accepts NULL; returns NULL. */
struct token_bucket *token_bucket_free(struct token_bucket *tb);

/* Takes one token without sleeping and returns how many milliseconds (on the bucket's
 * clock) the caller must wait before using it: 0 within the burst, then 1000/qps apart, and
 * never before a hold ends. NULL means unlimited (0). */
uint64_t token_bucket_reserve(struct token_bucket *tb);
/* token_bucket_reserve() and a real sleep for the delay; returns the milliseconds waited. */
uint64_t token_bucket_wait(struct token_bucket *tb);
/* Serves no reservation before ms from now (a server's Retry-After); a shorter hold than
 * the one in force changes nothing. NULL is ignored. */
void token_bucket_hold(struct token_bucket *tb, uint64_t ms);

struct token_bucket_stats {
        uint64_t reservations; /* tokens taken */
        uint64_t delayed;      /* of which had to wait */
        uint64_t wait_ms;      /* sum of the waits handed out */
        uint64_t holds;        /* token_bucket_hold() calls that extended the hold */
};

/* A consistent snapshot of the counters since creation. NULL gives zeros. */
void token_bucket_stats(struct token_bucket *tb, struct token_bucket_stats *ret);

/* Exports the counters on m, labelled api="<api>" (copied; "maas", "kube"):
 *   capmaas_client_budget_requests_total   requests that took a token
 *   capmaas_client_budget_delayed_total    of which waited for it
 *   capmaas_client_budget_wait_seconds_total   the waits summed
 *   capmaas_client_budget_holds_total      Retry-After answers that held the bucket
 * sampled by a collector at each render, so tb must outlive every render of m. */
MUST_CHECK int token_bucket_export(struct token_bucket *tb, struct metrics *m, const char *api);
