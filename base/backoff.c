/* backoff: exponential delay with a cap and half-range jitter. */
#include "backoff.h"

uint64_t backoff_delay_ms(const struct backoff_policy *p, unsigned failures)
{
        uint64_t d = p->base_ms;

        for (unsigned i = 0; i < failures && d < p->max_ms; i++)
                d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
        return d < p->max_ms ? d : p->max_ms;
}

uint64_t backoff_jittered_ms(const struct backoff_policy *p, unsigned failures, uint64_t rnd)
{
        uint64_t d = backoff_delay_ms(p, failures);
        uint64_t half = d / 2;

        return half + (half ? rnd % (d - half + 1) : 0);
}
