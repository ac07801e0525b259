/*
 * workqueue: client-go's work queue, delaying queue and default controller rate limiter in
 * one object behind one mutex.
 *
 * Design: every key the queue knows about has one struct wq_entry in a chained hash table.
 * The entry carries all of the key's state at once: dirty (added, not yet handed out),
 * processing (handed out, not yet done), queued (in the FIFO list; always dirty and not
 * processing), delayed (in the min-heap ordered by due time, then by insertion), and its
 * rate-limiter failure count. An entry with none of these is freed at once, so memory is
 * bounded by the keys in flight plus the keys with unforgotten failures.
 *
 * Delayed keys move into the FIFO lazily, whenever a caller holds the lock (get, len,
 * tick); a blocked getter waits with a timeout equal to the earliest due time, so no timer
 * thread exists. The condvar uses CLOCK_MONOTONIC; the due times use the injected clock.
 */
#include "workqueue.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backoff.h"
#include "clock.h"
#include "err.h"
#include "xalloc.h"

#define DEFAULT_BASE_DELAY_MS 5
#define DEFAULT_MAX_DELAY_MS  1000000 /* 1000 s */
#define DEFAULT_BUCKET_QPS    10
#define DEFAULT_BUCKET_BURST  100
#define MILLI                 1000 /* token bucket fixed point: 1 token = 1000 milli-tokens */
#define INITIAL_BUCKETS       64

struct wq_entry {
        struct wq_entry *hnext; /* hash chain */
        struct wq_entry *qnext; /* FIFO link while queued */
        char *key;              /* owned */
        uint64_t hash;
        uint64_t added_ms;   /* when it became dirty, for queue duration */
        uint64_t started_ms; /* when a worker got it, for work duration */
        uint64_t due_ms;     /* while delayed */
        uint64_t due_seq;    /* FIFO among equal due times */
        size_t heap_idx;     /* while delayed */
        unsigned failures;
        bool dirty;
        bool processing;
        bool queued;
        bool delayed;
};

struct workqueue {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        const struct clock_ops *clock; /* borrowed */
        struct backoff_policy backoff;
        uint64_t bucket_qps;
        uint64_t bucket_burst;
        int64_t bucket_milli; /* may go negative: reservations not yet covered */
        uint64_t bucket_last_ms;
        struct wq_entry **table; /* owned, n_table chains of owned entries */
        size_t n_table;
        size_t n_entries;
        struct wq_entry *head; /* FIFO of ready keys (borrowed from the table) */
        struct wq_entry *tail;
        struct wq_entry **heap; /* owned array; entries borrowed from the table */
        size_t heap_len;
        size_t heap_cap;
        uint64_t seq;
        struct workqueue_stats stats;
        bool shutting_down;
};

/* ---- hash table ---- */

static uint64_t key_hash(const char *key)
{
        uint64_t h = 14695981039346656037ULL; /* FNV-1a */

        for (const unsigned char *p = (const unsigned char *)key; *p; p++)
                h = (h ^ *p) * 1099511628211ULL;
        return h;
}

static int key_check(const char *key)
{
        size_t len = strnlen(key, WORKQUEUE_MAX_KEY + 1);

        return len == 0 || len > WORKQUEUE_MAX_KEY ? CM_EINVAL : 0;
}

static struct wq_entry *entry_find(const struct workqueue *q, const char *key)
{
        uint64_t h = key_hash(key);

        for (struct wq_entry *e = q->table[h & (q->n_table - 1)]; e; e = e->hnext)
                if (e->hash == h && strcmp(e->key, key) == 0)
                        return e;
        return NULL;
}

static void table_grow(struct workqueue *q)
{
        size_t n = q->n_table * 2;
        struct wq_entry **t = xcalloc(n, sizeof(struct wq_entry *));

        for (size_t i = 0; i < q->n_table; i++) {
                struct wq_entry *e = q->table[i];

                while (e) {
                        struct wq_entry *next = e->hnext;

                        e->hnext = t[e->hash & (n - 1)];
                        t[e->hash & (n - 1)] = e;
                        e = next;
                }
        }
        free(q->table);
        q->table = t;
        q->n_table = n;
}

static struct wq_entry *entry_get(struct workqueue *q, const char *key)
{
        struct wq_entry *e = entry_find(q, key);
        size_t b;

        if (e)
                return e;
        if (q->n_entries >= q->n_table)
                table_grow(q);
        e = xcalloc(1, sizeof(*e));
        e->key = xstrdup(key);
        e->hash = key_hash(key);
        b = e->hash & (q->n_table - 1);
        e->hnext = q->table[b];
        q->table[b] = e;
        q->n_entries++;
        return e;
}

/* Frees e if no state refers to it any more. */
static void entry_maybe_free(struct workqueue *q, struct wq_entry *e)
{
        struct wq_entry **pp;

        if (e->dirty || e->processing || e->delayed || e->failures)
                return;
        for (pp = &q->table[e->hash & (q->n_table - 1)]; *pp != e; pp = &(*pp)->hnext)
                ;
        *pp = e->hnext;
        q->n_entries--;
        free(e->key);
        free(e);
}

/* ---- delay heap: min-heap on (due_ms, due_seq) ---- */

static bool heap_less(const struct wq_entry *a, const struct wq_entry *b)
{
        return a->due_ms != b->due_ms ? a->due_ms < b->due_ms : a->due_seq < b->due_seq;
}

static void heap_set(struct workqueue *q, size_t i, struct wq_entry *e)
{
        q->heap[i] = e;
        e->heap_idx = i;
}

static void heap_up(struct workqueue *q, size_t i)
{
        struct wq_entry *e = q->heap[i];

        while (i > 0 && heap_less(e, q->heap[(i - 1) / 2])) {
                heap_set(q, i, q->heap[(i - 1) / 2]);
                i = (i - 1) / 2;
        }
        heap_set(q, i, e);
}

static void heap_down(struct workqueue *q, size_t i)
{
        struct wq_entry *e = q->heap[i];

        for (;;) {
                size_t c = 2 * i + 1;

                if (c >= q->heap_len)
                        break;
                if (c + 1 < q->heap_len && heap_less(q->heap[c + 1], q->heap[c]))
                        c++;
                if (!heap_less(q->heap[c], e))
                        break;
                heap_set(q, i, q->heap[c]);
                i = c;
        }
        heap_set(q, i, e);
}

static void heap_push(struct workqueue *q, struct wq_entry *e)
{
        if (q->heap_len == q->heap_cap) {
                q->heap_cap = q->heap_cap ? q->heap_cap * 2 : 16;
                q->heap = xrealloc(q->heap, q->heap_cap * sizeof(struct wq_entry *));
        }
        e->delayed = true;
        heap_set(q, q->heap_len++, e);
        heap_up(q, e->heap_idx);
}

static struct wq_entry *heap_pop(struct workqueue *q)
{
        struct wq_entry *top = q->heap[0];

        q->heap_len--;
        if (q->heap_len > 0) {
                heap_set(q, 0, q->heap[q->heap_len]);
                heap_down(q, 0);
        }
        top->delayed = false;
        return top;
}

/* ---- FIFO and state transitions (all with q->lock held) ---- */

static uint64_t now_ms(const struct workqueue *q)
{
        return clock_now_ms(q->clock);
}

static void fifo_push(struct workqueue *q, struct wq_entry *e)
{
        e->queued = true;
        e->qnext = NULL;
        if (q->tail)
                q->tail->qnext = e;
        else
                q->head = e;
        q->tail = e;
        q->stats.depth++;
        pthread_cond_signal(&q->cond);
}

static struct wq_entry *fifo_pop(struct workqueue *q)
{
        struct wq_entry *e = q->head;

        q->head = e->qnext;
        if (!q->head)
                q->tail = NULL;
        e->qnext = NULL;
        e->queued = false;
        q->stats.depth--;
        return e;
}

/* client-go Add: a dirty key is not added twice; a processing key waits for done(). */
static void enqueue(struct workqueue *q, struct wq_entry *e, uint64_t now)
{
        if (e->dirty)
                return;
        e->dirty = true;
        e->added_ms = now;
        q->stats.adds_total++;
        if (!e->processing)
                fifo_push(q, e);
}

/* client-go AddAfter: park e until now + delay; a sooner due time wins. */
static void schedule(struct workqueue *q, struct wq_entry *e, uint64_t now, uint64_t delay)
{
        uint64_t due = now + delay < now ? UINT64_MAX : now + delay;

        if (delay == 0) {
                enqueue(q, e, now);
                return;
        }
        if (e->delayed && e->due_ms <= due)
                return;
        e->due_ms = due;
        e->due_seq = q->seq++;
        if (e->delayed)
                heap_up(q, e->heap_idx);
        else
                heap_push(q, e);
        /* A blocked getter may be sleeping towards a later due time: let it re-arm. */
        if (e->heap_idx == 0)
                pthread_cond_signal(&q->cond);
}

static void promote_due(struct workqueue *q)
{
        uint64_t now;

        if (q->heap_len == 0)
                return;
        now = now_ms(q);
        while (q->heap_len > 0 && q->heap[0]->due_ms <= now)
                enqueue(q, heap_pop(q), now);
}

static void stat_observe(uint64_t *count, uint64_t *sum, uint64_t *max, uint64_t ms)
{
        (*count)++;
        *sum += ms;
        if (ms > *max)
                *max = ms;
}

/* ---- rate limiter ---- */

/* golang.org/x/time/rate Reserve().Delay(): take one token, possibly going into debt, and
 * return how long until the debt is paid back at qps tokens per second. */
static uint64_t bucket_reserve(struct workqueue *q, uint64_t now)
{
        int64_t cap = (int64_t)(q->bucket_burst * MILLI);
        uint64_t elapsed = now - q->bucket_last_ms;
        uint64_t missing = (uint64_t)(cap - q->bucket_milli);

        /* qps milli-tokens arrive per millisecond. */
        if (elapsed >= missing / q->bucket_qps + 1)
                q->bucket_milli = cap;
        else
                q->bucket_milli += (int64_t)(elapsed * q->bucket_qps);
        if (q->bucket_milli > cap)
                q->bucket_milli = cap;
        q->bucket_last_ms = now;
        q->bucket_milli -= MILLI;
        if (q->bucket_milli >= 0)
                return 0;
        return ((uint64_t)-q->bucket_milli + q->bucket_qps - 1) / q->bucket_qps;
}

/* client-go MaxOfRateLimiter(ItemExponentialFailureRateLimiter, BucketRateLimiter). */
static uint64_t rate_limit_delay(struct workqueue *q, struct wq_entry *e, uint64_t now)
{
        uint64_t per_key = backoff_delay_ms(&q->backoff, e->failures);
        uint64_t global = bucket_reserve(q, now);

        if (e->failures < UINT32_MAX)
                e->failures++;
        return per_key > global ? per_key : global;
}

/* ---- lifecycle ---- */

static int sync_init(struct workqueue *q)
{
        pthread_condattr_t ca;
        int r = CM_ENOMEM;

        if (pthread_condattr_init(&ca) != 0)
                return CM_ENOMEM;
        if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0)
                goto out;
        if (pthread_cond_init(&q->cond, &ca) != 0)
                goto out;
        if (pthread_mutex_init(&q->lock, NULL) != 0) {
                pthread_cond_destroy(&q->cond);
                goto out;
        }
        r = 0;
out:
        pthread_condattr_destroy(&ca);
        return r;
}

static uint64_t or_default(uint64_t v, uint64_t def)
{
        return v ? v : def;
}

/* Fills q's settings from o (defaults for zero fields); CM_EINVAL if they make no sense. */
static int apply_opts(struct workqueue *q, const struct workqueue_opts *o)
{
        q->backoff.base_ms = or_default(o->base_delay_ms, DEFAULT_BASE_DELAY_MS);
        q->backoff.max_ms = or_default(o->max_delay_ms, DEFAULT_MAX_DELAY_MS);
        q->bucket_qps = or_default(o->bucket_qps, DEFAULT_BUCKET_QPS);
        q->bucket_burst = or_default(o->bucket_burst, DEFAULT_BUCKET_BURST);
        q->clock = o->clock ? o->clock : clock_system();
        if (q->backoff.base_ms > q->backoff.max_ms || q->bucket_burst > INT32_MAX ||
            q->bucket_qps > INT32_MAX)
                return CM_EINVAL;
        return 0;
}

int workqueue_new(const struct workqueue_opts *o, struct workqueue **ret)
{
        static const struct workqueue_opts none;
        struct workqueue *q = xcalloc(1, sizeof(*q));
        int r;

        r = apply_opts(q, o ? o : &none);
        if (r < 0)
                goto out;
        r = sync_init(q);
        if (r < 0)
                goto out;
        q->bucket_milli = (int64_t)(q->bucket_burst * MILLI);
        q->bucket_last_ms = now_ms(q);
        q->n_table = INITIAL_BUCKETS;
        q->table = xcalloc(q->n_table, sizeof(struct wq_entry *));
        *ret = q;
        q = NULL;
out:
        free(q);
        return r;
}

struct workqueue *workqueue_free(struct workqueue *q)
{
        if (!q)
                return NULL;
        for (size_t i = 0; i < q->n_table; i++) {
                struct wq_entry *e = q->table[i];

                while (e) {
                        struct wq_entry *next = e->hnext;

                        free(e->key);
                        free(e);
                        e = next;
                }
        }
        free(q->table);
        free(q->heap);
        pthread_cond_destroy(&q->cond);
        pthread_mutex_destroy(&q->lock);
        free(q);
        return NULL;
}

/* ---- adding ---- */

enum add_kind {
        ADD_NOW,
        ADD_AFTER,
        ADD_RATE_LIMITED,
};

static int add_common(struct workqueue *q, const char *key, enum add_kind kind, uint64_t delay)
{
        struct wq_entry *e;
        uint64_t now;
        int r = key_check(key);

        if (r < 0)
                return r;
        pthread_mutex_lock(&q->lock);
        if (q->shutting_down) {
                r = CM_ESHUTDOWN;
                goto out_unlock;
        }
        now = now_ms(q);
        e = entry_get(q, key);
        if (kind == ADD_RATE_LIMITED) {
                delay = rate_limit_delay(q, e, now);
                q->stats.retries_total++;
        }
        schedule(q, e, now, kind == ADD_NOW ? 0 : delay);
out_unlock:
        pthread_mutex_unlock(&q->lock);
        return r;
}

int workqueue_add(struct workqueue *q, const char *key)
{
        return add_common(q, key, ADD_NOW, 0);
}

int workqueue_add_after(struct workqueue *q, const char *key, uint64_t delay_ms)
{
        return add_common(q, key, ADD_AFTER, delay_ms);
}

int workqueue_add_rate_limited(struct workqueue *q, const char *key)
{
        return add_common(q, key, ADD_RATE_LIMITED, 0);
}

void workqueue_forget(struct workqueue *q, const char *key)
{
        struct wq_entry *e;

        pthread_mutex_lock(&q->lock);
        e = entry_find(q, key);
        if (e) {
                e->failures = 0;
                entry_maybe_free(q, e);
        }
        pthread_mutex_unlock(&q->lock);
}

unsigned workqueue_num_requeues(struct workqueue *q, const char *key)
{
        const struct wq_entry *e;
        unsigned n;

        pthread_mutex_lock(&q->lock);
        e = entry_find(q, key);
        n = e ? e->failures : 0;
        pthread_mutex_unlock(&q->lock);
        return n;
}

/* ---- getting ---- */

static char *take(struct workqueue *q)
{
        struct wq_entry *e = fifo_pop(q);
        uint64_t now = now_ms(q);

        e->dirty = false;
        e->processing = true;
        e->started_ms = now;
        q->stats.processing++;
        stat_observe(&q->stats.queue_count, &q->stats.queue_ms_sum, &q->stats.queue_ms_max,
                     now > e->added_ms ? now - e->added_ms : 0);
        return xstrdup(e->key);
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
        return a->tv_sec != b->tv_sec ? a->tv_sec < b->tv_sec : a->tv_nsec < b->tv_nsec;
}

static bool ts_passed(const struct timespec *deadline)
{
        struct timespec now;

        (void)clock_gettime(CLOCK_MONOTONIC, &now);
        return !ts_before(&now, deadline);
}

/* Sleeps until signalled, the earliest delayed key is due, or *deadline (may be NULL). The
 * due time is on the queue's clock; the wait is real time (see the header on fake clocks). */
static void wait_ready(struct workqueue *q, const struct timespec *deadline)
{
        struct timespec wake;
        bool timed = false;

        if (q->heap_len > 0) {
                uint64_t now = now_ms(q);
                uint64_t due = q->heap[0]->due_ms;

                clock_deadline_ts(due > now ? due - now : 0, &wake);
                timed = true;
        }
        if (deadline && (!timed || ts_before(deadline, &wake))) {
                wake = *deadline;
                timed = true;
        }
        q->stats.waiters++;
        if (timed)
                (void)pthread_cond_timedwait(&q->cond, &q->lock, &wake);
        else
                (void)pthread_cond_wait(&q->cond, &q->lock);
        q->stats.waiters--;
}

static int get_until(struct workqueue *q, const struct timespec *deadline, char **ret_key)
{
        int r;

        pthread_mutex_lock(&q->lock);
        for (;;) {
                promote_due(q);
                if (q->head) {
                        *ret_key = take(q);
                        r = 0;
                        break;
                }
                if (q->shutting_down) {
                        r = CM_ESHUTDOWN;
                        break;
                }
                if (deadline && ts_passed(deadline)) {
                        r = CM_ETIMEDOUT;
                        break;
                }
                wait_ready(q, deadline);
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}

int workqueue_get(struct workqueue *q, char **ret_key)
{
        return get_until(q, NULL, ret_key);
}

int workqueue_get_timeout(struct workqueue *q, uint64_t timeout_ms, char **ret_key)
{
        struct timespec deadline;

        clock_deadline_ts(timeout_ms, &deadline);
        return get_until(q, &deadline, ret_key);
}

void workqueue_done(struct workqueue *q, const char *key)
{
        struct wq_entry *e;
        uint64_t now;

        pthread_mutex_lock(&q->lock);
        e = entry_find(q, key);
        if (!e || !e->processing)
                goto out_unlock;
        now = now_ms(q);
        e->processing = false;
        q->stats.processing--;
        stat_observe(&q->stats.work_count, &q->stats.work_ms_sum, &q->stats.work_ms_max,
                     now > e->started_ms ? now - e->started_ms : 0);
        if (e->dirty)
                fifo_push(q, e);
        else
                entry_maybe_free(q, e);
out_unlock:
        pthread_mutex_unlock(&q->lock);
}

/* ---- the rest ---- */

size_t workqueue_len(struct workqueue *q)
{
        size_t n;

        pthread_mutex_lock(&q->lock);
        promote_due(q);
        n = (size_t)q->stats.depth;
        pthread_mutex_unlock(&q->lock);
        return n;
}

void workqueue_tick(struct workqueue *q)
{
        pthread_mutex_lock(&q->lock);
        promote_due(q);
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
}

void workqueue_shutdown(struct workqueue *q)
{
        pthread_mutex_lock(&q->lock);
        q->shutting_down = true;
        /* client-go's delaying queue stops its timer loop: parked keys are dropped. */
        while (q->heap_len > 0)
                entry_maybe_free(q, heap_pop(q));
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
}

bool workqueue_is_shutting_down(struct workqueue *q)
{
        bool s;

        pthread_mutex_lock(&q->lock);
        s = q->shutting_down;
        pthread_mutex_unlock(&q->lock);
        return s;
}

/* controller-runtime's workqueue_unfinished_work_seconds and
 * workqueue_longest_running_processor_seconds, from the keys being processed. */
static void unfinished_work(const struct workqueue *q, struct workqueue_stats *st)
{
        uint64_t now = now_ms(q);

        st->unfinished_ms = 0;
        st->longest_ms = 0;
        for (size_t i = 0; i < q->n_table; i++) {
                for (const struct wq_entry *e = q->table[i]; e; e = e->hnext) {
                        uint64_t ms = now > e->started_ms ? now - e->started_ms : 0;

                        if (!e->processing)
                                continue;
                        st->unfinished_ms += ms;
                        if (ms > st->longest_ms)
                                st->longest_ms = ms;
                }
        }
}

void workqueue_stats(struct workqueue *q, struct workqueue_stats *ret)
{
        struct workqueue_stats st;

        pthread_mutex_lock(&q->lock);
        st = q->stats;
        st.delayed = q->heap_len;
        unfinished_work(q, &st);
        pthread_mutex_unlock(&q->lock);
        *ret = st;
}
