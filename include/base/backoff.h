#pragma once
/*
 * backoff: exponential backoff with full jitter, as used by the MAAS client's retries, the
 * informers' reconnects and the work queue's per-key delays. Pure functions; thread-safe.
 */

#include <stdint.h>

struct backoff_policy {
        uint64_t base_ms; /* delay after the first failure */
        uint64_t max_ms;  /* cap */
};

/* base_ms * 2^failures, capped at max_ms (failures counts from 0). */
uint64_t backoff_delay_ms(const struct backoff_policy *p, unsigned failures);
/* A uniformly random delay in [d/2, d] for d = backoff_delay_ms(): spreads retries of many
 * clients without ever waiting less than half the computed delay. rnd is any 64-bit random
 * value (the caller owns the generator so tests are deterministic). */
uint64_t backoff_jittered_ms(const struct backoff_policy *p, unsigned failures, uint64_t rnd);
