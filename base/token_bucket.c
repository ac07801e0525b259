/*
 * token_bucket: the shared request budget (token_bucket.h). All state is under one mutex;
 * the time spent inside it is a few arithmetic operations, and nobody sleeps holding it.
 */
#include "token_bucket.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "compiler.h"
#include "err.h"
#include "metrics.h"
#include "xalloc.h"

struct token_bucket {
        pthread_mutex_t mu;
        const struct clock_ops *clock; /* borrowed */
        double qps;                    /* <= 0: unlimited */
        double burst;
        double tokens;       /* under mu; may be negative (reserved ahead) */
        uint64_t last_ms;    /* when tokens was last refilled */
        uint64_t hold_until; /* no token is usable before this time (ms) */
        struct token_bucket_stats stats;
        struct metric_series *series[4]; /* requests, delayed, wait seconds, holds */
};

int token_bucket_new(double qps,
                     unsigned burst,
                     const struct clock_ops *clock,
                     struct token_bucket **ret)
{
        struct token_bucket *tb;

        if (isnan(qps))
                return CM_EINVAL;
        tb = xcalloc(1, sizeof(*tb));
        if (pthread_mutex_init(&tb->mu, NULL) != 0) {
                free(tb);
                return CM_ENOMEM;
        }
        tb->clock = clock;
        tb->qps = qps;
        tb->burst = burst ? (double)burst : 1.0;
        tb->tokens = tb->burst;
        tb->last_ms = clock_now_ms(clock);
        *ret = tb;
        return 0;
}

struct token_bucket *token_bucket_free(struct token_bucket *tb)
{
        if (!tb)
                return NULL;
        (void)pthread_mutex_destroy(&tb->mu);
        free(tb);
        return NULL;
}

/* Called with mu held: adds the tokens earned since last_ms, up to the burst. */
/* ceil(ms) for a positive wait, saturated (no libm: see CMakeLists.txt, base). */
static uint64_t ceil_ms(double ms)
{
        uint64_t w;

        if (!(ms > 0))
                return 0;
        if (ms >= 18446744073709549568.0) /* the largest double below 2^64 */
                return UINT64_MAX;
        w = (uint64_t)ms;
        return (double)w < ms ? w + 1 : w;
}

static void refill(struct token_bucket *tb, uint64_t now)
{
        if (now <= tb->last_ms)
                return;
        tb->tokens += (double)(now - tb->last_ms) * tb->qps / 1000.0;
        if (tb->tokens > tb->burst)
                tb->tokens = tb->burst;
        tb->last_ms = now;
}

uint64_t token_bucket_reserve(struct token_bucket *tb)
{
        uint64_t now, wait = 0, held;

        if (!tb)
                return 0;
        pthread_mutex_lock(&tb->mu);
        now = clock_now_ms(tb->clock);
        if (tb->qps > 0) {
                refill(tb, now);
                tb->tokens -= 1.0;
                if (tb->tokens < 0)
                        wait = ceil_ms(-tb->tokens * 1000.0 / tb->qps);
        }
        held = tb->hold_until > now ? tb->hold_until - now : 0;
        if (held > wait)
                wait = held;
        tb->stats.reservations++;
        if (wait) {
                tb->stats.delayed++;
                tb->stats.wait_ms += wait;
        }
        pthread_mutex_unlock(&tb->mu);
        return wait;
}

uint64_t token_bucket_wait(struct token_bucket *tb)
{
        uint64_t ms = token_bucket_reserve(tb);
        struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
                               .tv_nsec = (long)(ms % 1000) * 1000000L };

        if (ms == 0)
                return 0;
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        return ms;
}

void token_bucket_hold(struct token_bucket *tb, uint64_t ms)
{
        uint64_t until;

        if (!tb || ms == 0)
                return;
        pthread_mutex_lock(&tb->mu);
        until = clock_now_ms(tb->clock) + ms;
        if (until > tb->hold_until) {
                tb->hold_until = until;
                tb->stats.holds++;
        }
        pthread_mutex_unlock(&tb->mu);
}

void token_bucket_stats(struct token_bucket *tb, struct token_bucket_stats *ret)
{
        *ret = (struct token_bucket_stats){ 0 };
        if (!tb)
                return;
        pthread_mutex_lock(&tb->mu);
        *ret = tb->stats;
        pthread_mutex_unlock(&tb->mu);
}

static void collect(struct metrics *m, void *ud)
{
        struct token_bucket *tb = ud;
        struct token_bucket_stats st;

        (void)m;
        token_bucket_stats(tb, &st);
        metric_counter_set(tb->series[0], (double)st.reservations);
        metric_counter_set(tb->series[1], (double)st.delayed);
        metric_counter_set(tb->series[2], (double)st.wait_ms / 1000.0);
        metric_counter_set(tb->series[3], (double)st.holds);
}

int token_bucket_export(struct token_bucket *tb, struct metrics *m, const char *api)
{
        static const char *const labels[] = { "api", NULL };

        static const struct {
                const char *name, *help;
        } families[] = {
                { "capmaas_client_budget_requests_total",
                  "Requests that took a token of the client-side request budget." },
                { "capmaas_client_budget_delayed_total",
                  "Requests that waited for a token of the request budget." },
                { "capmaas_client_budget_wait_seconds_total",
                  "Seconds requests waited for the request budget, summed." },
                { "capmaas_client_budget_holds_total",
                  "Retry-After answers that held the whole request budget." },
        };
        struct metric_family *f;
        int r;

        _Static_assert(ARRAY_SIZE(families) == ARRAY_SIZE(tb->series), "one series a family");
        for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
                r = metrics_counter(m, families[i].name, families[i].help, labels, &f);
                if (r < 0)
                        return r;
                tb->series[i] = metric_series(f, api);
        }
        return metrics_add_collector(m, collect, tb, NULL);
}
