/*
 * kube_ratelimit: client-go's token bucket (--kube-api-qps, --kube-api-burst) shared by
 * every kube_client of the process. A caller reserves a token under the mutex (the bucket
 * may go negative: later callers queue behind earlier ones, as with golang.org/x/time/rate
 * reservations) and then sleeps outside the lock for the computed delay.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "kube_client.h"
#include "xalloc.h"

struct kube_ratelimit {
        pthread_mutex_t mu;
        const struct clock_ops *clock; /* borrowed */
        double qps;                    /* <= 0: unlimited */
        double burst;
        double tokens; /* under mu; may be negative (reserved ahead) */
        uint64_t last_ms;
};

int kube_ratelimit_new(double qps,
                       unsigned burst,
                       const struct clock_ops *clock,
                       struct kube_ratelimit **ret)
{
        struct kube_ratelimit *rl;

        if (isnan(qps))
                return CM_EINVAL;
        rl = xcalloc(1, sizeof(*rl));
        if (pthread_mutex_init(&rl->mu, NULL) != 0) {
                free(rl);
                return CM_ENOMEM;
        }
        rl->clock = clock;
        rl->qps = qps;
        rl->burst = burst ? (double)burst : 1.0;
        rl->tokens = rl->burst;
        rl->last_ms = clock_now_ms(clock);
        *ret = rl;
        return 0;
}

struct kube_ratelimit *kube_ratelimit_free(struct kube_ratelimit *rl)
{
        if (!rl)
                return NULL;
        pthread_mutex_destroy(&rl->mu);
        free(rl);
        return NULL;
}

uint64_t kube_ratelimit_reserve(struct kube_ratelimit *rl)
{
        uint64_t now, wait = 0;

        if (!rl || rl->qps <= 0)
                return 0;
        pthread_mutex_lock(&rl->mu);
        now = clock_now_ms(rl->clock);
        if (now > rl->last_ms) {
                rl->tokens += (double)(now - rl->last_ms) * rl->qps / 1000.0;
                if (rl->tokens > rl->burst)
                        rl->tokens = rl->burst;
                rl->last_ms = now;
        }
        rl->tokens -= 1.0;
        if (rl->tokens < 0)
                wait = (uint64_t)ceil(-rl->tokens * 1000.0 / rl->qps);
        pthread_mutex_unlock(&rl->mu);
        return wait;
}

uint64_t kube_ratelimit_wait(struct kube_ratelimit *rl)
{
        uint64_t ms = kube_ratelimit_reserve(rl);
        struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
                               .tv_nsec = (long)(ms % 1000) * 1000000L };

        if (ms == 0)
                return 0;
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        return ms;
}
