#pragma once
/*
 * metrics: a small Prometheus registry that renders the text exposition format 0.0.4.
 *
 * Model: a registry (struct metrics) owns families (counter, gauge, histogram), each with a
 * fixed list of label names; a family owns its series, one per distinct tuple of label
 * values. Every family and series lives until metrics_free() (a series deleted with
 * metric_series_delete excepted), so pointers to them are stable
 * and hot paths cache a series once and then update it with no lookup, no lock and no
 * allocation.
 *
 * Threads: registration, series creation, collectors and rendering are thread-safe and take
 * the registry mutex (collectors are called without it). Updates (metric_counter_*,
 * metric_gauge_*, metric_histogram_observe) are lock-free atomics and may be called from any
 * thread at any time, including during a render.
 *
 * Output order: families in registration order, series in creation order. A family with
 * labels and no series yet is not rendered at all (as Prometheus's Go client does); a family
 * without labels gets its single series at registration, so it always renders.
 *
 * Cardinality: each family holds at most max_series series (default 10 000).
 * metric_series_get() then fails with CM_ETOOBIG; metric_series_of() instead returns the
 * family's shared overflow series, whose every label value is METRICS_OVERFLOW_VALUE, so
 * updates are still counted somewhere visible and memory stays bounded.
 */

#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"

struct buf;
struct metrics;
struct metric_family;
struct metric_series;

enum metric_type {
        METRIC_COUNTER,
        METRIC_GAUGE,
        METRIC_HISTOGRAM,
        METRIC_TYPE_COUNT,
};

#define METRICS_DEFAULT_MAX_SERIES 10000
#define METRICS_MAX_LABELS         16  /* label names per family */
#define METRICS_MAX_LABEL_VALUE    256 /* bytes per label value */
#define METRICS_MAX_BUCKETS        128 /* finite histogram bounds */
#define METRICS_MAX_COLLECTORS     16
#define METRICS_OVERFLOW_VALUE     "_overflow"

/* Prometheus client default buckets (.005 … 10 s) and controller-runtime's reconcile time
 * buckets (0.005 … 60 s). */
#define METRICS_DEFAULT_BUCKETS_N   11
#define METRICS_RECONCILE_BUCKETS_N 40
extern const double metrics_default_buckets[METRICS_DEFAULT_BUCKETS_N];
extern const double metrics_reconcile_buckets[METRICS_RECONCILE_BUCKETS_N];

struct metric_desc {
        enum metric_type type;
        const char *name;          /* [a-zA-Z_:][a-zA-Z0-9_:]*; copied */
        const char *help;          /* any text; copied; NULL = "" */
        const char *const *labels; /* NULL-terminated names; NULL = none; copied */
        const double *buckets;     /* histogram only: increasing finite upper bounds; a
                                    * trailing +Inf is dropped; NULL = default buckets */
        size_t n_buckets;
        size_t max_series; /* 0 = METRICS_DEFAULT_MAX_SERIES */
};

/* Called at the start of every render, without the registry lock, possibly from several
 * scraping threads at once; typically samples something and sets gauges. */
typedef void metrics_collector_fn(struct metrics *m, void *ud);

MUST_CHECK int metrics_new(struct metrics **ret);
/* Frees the registry, its families, series and collector data (via their ud_free). Accepts
 * NULL; returns NULL. No other thread may use the registry or its series any more. */
struct metrics *metrics_free(struct metrics *m);

/*
 * Registers a family, or returns the existing one when name, type, label names (in order)
 * and histogram buckets all match (help and max_series of a later call are ignored).
 * CM_EINVAL: invalid name, label name (also "__" prefix, duplicates, "le" on a histogram) or
 * buckets. CM_ECONFLICT: the name, or a histogram's _bucket/_sum/_count name, is taken.
 */
MUST_CHECK int metrics_register(struct metrics *m,
                                const struct metric_desc *d,
                                struct metric_family **ret);
/* Shorthands for metrics_register() with default limits. */
MUST_CHECK int metrics_counter(struct metrics *m,
                               const char *name,
                               const char *help,
                               const char *const *labels,
                               struct metric_family **ret);
MUST_CHECK int metrics_gauge(struct metrics *m,
                             const char *name,
                             const char *help,
                             const char *const *labels,
                             struct metric_family **ret);

/*
 * Gets or creates the series for the NULL-terminated label values (one per label name, in
 * order; any bytes). CM_EINVAL: wrong number of values. CM_ETOOBIG: a value longer than
 * METRICS_MAX_LABEL_VALUE, or the family is at max_series. Takes the registry mutex.
 */
MUST_CHECK int metric_series_get(struct metric_family *f,
                                 const char *const *values,
                                 struct metric_series **ret);
/* Same, but never NULL: when metric_series_get() fails (cap reached, value too long) it
 * returns the family's overflow series. A wrong number of values asserts. values may be
 * NULL for a family without labels. */
struct metric_series *metric_series_of(struct metric_family *f, const char *const *values);
/* metric_series_of() with the values as arguments: metric_series(f, "/mutate", "200"), or
 * metric_series(f, NULL) for a family without labels; a trailing NULL is allowed. A macro
 * (named as the function it stands for) so the values are type-checked const char * and
 * no variadic NULL sentinel is involved; f is evaluated once. */
#define metric_series(f, ...) metric_series_of((f), (const char *const[]){ __VA_ARGS__, NULL })

/*
 * Deletes the series of these label values, if any (true when there was one), so a family
 * labelled by something that comes and goes (an identity, say) stays bounded. Only for a
 * series one owner keeps: no pointer to it may be used after this returns. Takes the
 * registry mutex. Not for a family without labels.
 */
bool metric_series_delete(struct metric_family *f, const char *const *values);

/* Lock-free updates. Counters ignore negative and NaN increments. A series of the wrong
 * type asserts. */
void metric_counter_add(struct metric_series *s, double v);
void metric_counter_inc(struct metric_series *s);
/* For collectors mirroring an external monotonic count: raises the counter to v; a lower v
 * is ignored. */
void metric_counter_set(struct metric_series *s, double v);
void metric_gauge_set(struct metric_series *s, double v);
void metric_gauge_add(struct metric_series *s, double v);
void metric_gauge_inc(struct metric_series *s);
void metric_gauge_dec(struct metric_series *s);
void metric_histogram_observe(struct metric_series *s, double v);
/* Current value of a counter or gauge, or the sum of a histogram (tests, collectors). */
double metric_series_value(const struct metric_series *s);

/* Adds a collector run before each render. ud_free (may be NULL) is called on ud by
 * metrics_free(). CM_ETOOBIG past METRICS_MAX_COLLECTORS (ud is then not freed). */
MUST_CHECK int metrics_add_collector(struct metrics *m,
                                     metrics_collector_fn *fn,
                                     void *ud,
                                     void (*ud_free)(void *ud));

/* Runs the collectors, then appends the text format (Content-Type "text/plain;
 * version=0.0.4; charset=utf-8") to out. CM_ETOOBIG if out's cap is reached; out then holds
 * a truncated text the caller should discard. */
MUST_CHECK int metrics_render(struct metrics *m, struct buf *out);
/* Length of the longest prefix of s that is a metric name (colon: [a-zA-Z_:][a-zA-Z0-9_:]*)
 * or a label name (no colon: [a-zA-Z_][a-zA-Z0-9_]*); 0 when none. */
size_t metrics_name_span(const char *s, bool colon);

/* Formats v as the text format writes it: "+Inf", "-Inf", "NaN", integers up to 2^53
 * without exponent ("1000000"), anything else in the shortest %g form that reads back
 * exactly. out must hold METRICS_DOUBLE_LEN bytes. */
#define METRICS_DOUBLE_LEN 32
void metrics_format_double(double v, char out[METRICS_DOUBLE_LEN]);
