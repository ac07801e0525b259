/*
 * metrics: Prometheus registry and text (0.0.4) renderer.
 *
 * Design: every value is a double kept as its bit pattern in an _Atomic uint64_t, so a
 * counter add or gauge add is a relaxed compare-and-swap loop and a gauge set is a store.
 * A histogram series keeps one non-cumulative atomic count per bucket (the last one is +Inf)
 * plus an atomic sum; the renderer accumulates the counts and derives _count from them, so
 * _count always equals the +Inf bucket even while observations race with a scrape.
 *
 * Locking: one registry mutex guards the family list, each family's hash table and creation
 * order array, and the collector count. Family fields other than those are immutable once
 * the family is published, which is what lets updates read them without the lock. Series are
 * allocated one by one and never moved or freed before metrics_free().
 */
#include "metrics.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "xalloc.h"

#define KEY_MAX       (METRICS_MAX_LABELS * (METRICS_MAX_LABEL_VALUE + 1))
#define INITIAL_SLOTS 8

const double metrics_default_buckets[METRICS_DEFAULT_BUCKETS_N] = {
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

const double metrics_reconcile_buckets[METRICS_RECONCILE_BUCKETS_N] = {
        0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
        0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5, 3.0,  3.5, 4.0,  4.5, 5,
        6,     7,    8,     9,    10,   15,   20,   25,   30,  40,   50,  60,
};

struct metric_series {
        struct metric_series *next;   /* hash chain; registry mutex */
        struct metric_family *family; /* borrowed; immutable */
        char *key;                    /* owned: each label value NUL-terminated, in order */
        size_t key_len;
        uint64_t hash;
        _Atomic uint64_t value;    /* double bits: counter/gauge value or histogram sum */
        _Atomic uint64_t counts[]; /* histogram: n_bounds + 1 bucket counts, last is +Inf */
};

struct metric_family {
        enum metric_type type;
        struct metrics *owner; /* borrowed */
        char *name;            /* owned */
        char *help;            /* owned */
        char **labels;         /* owned, n_labels names */
        size_t n_labels;
        double *bounds; /* owned, n_bounds finite increasing upper bounds */
        size_t n_bounds;
        size_t max_series;
        /* Guarded by the registry mutex once published: */
        struct metric_series **slots; /* hash table, n_slots chains */
        size_t n_slots;
        struct metric_series **order; /* owned series, creation order */
        size_t n_series;
        size_t cap_series;
};

struct collector {
        metrics_collector_fn *fn;
        void *ud;
        void (*ud_free)(void *ud);
};

struct metrics {
        pthread_mutex_t lock;
        struct metric_family **families; /* owned, registration order */
        size_t n_families;
        size_t cap_families;
        struct collector collectors[METRICS_MAX_COLLECTORS]; /* entries immutable once counted */
        size_t n_collectors;
};

static const char *const type_names[METRIC_TYPE_COUNT] = {
        [METRIC_COUNTER] = "counter",
        [METRIC_GAUGE] = "gauge",
        [METRIC_HISTOGRAM] = "histogram",
};

static const char *const histogram_suffixes[] = { "_bucket", "_sum", "_count" };

/* ---- atomic doubles ---- */

static uint64_t dbl_bits(double v)
{
        uint64_t u;

        memcpy(&u, &v, sizeof(u));
        return u;
}

static double bits_dbl(uint64_t u)
{
        double v;

        memcpy(&v, &u, sizeof(v));
        return v;
}

static void atomic_add_double(_Atomic uint64_t *p, double v)
{
        uint64_t old = atomic_load_explicit(p, memory_order_relaxed);
        uint64_t sum;

        do {
                sum = dbl_bits(bits_dbl(old) + v);
        } while (!atomic_compare_exchange_weak_explicit(p, &old, sum, memory_order_relaxed,
                                                        memory_order_relaxed));
}

/* ---- validation ---- */

static bool is_name_char(char c, bool first, bool colon)
{
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
                return true;
        if (c == ':')
                return colon;
        return !first && c >= '0' && c <= '9';
}

size_t metrics_name_span(const char *s, bool colon)
{
        size_t i = 0;

        while (s[i] && is_name_char(s[i], i == 0, colon))
                i++;
        return i;
}

static bool is_valid_name(const char *s, bool colon)
{
        return s && s[0] && !s[metrics_name_span(s, colon)];
}

static int check_labels(const char *const *labels, enum metric_type type, size_t *ret_n)
{
        size_t n;
        size_t j;

        for (n = 0; labels && labels[n]; n++) {
                if (n >= METRICS_MAX_LABELS || !is_valid_name(labels[n], false))
                        return CM_EINVAL;
                if (strncmp(labels[n], "__", 2) == 0)
                        return CM_EINVAL;
                if (type == METRIC_HISTOGRAM && strcmp(labels[n], "le") == 0)
                        return CM_EINVAL;
                for (j = 0; j < n; j++)
                        if (strcmp(labels[j], labels[n]) == 0)
                                return CM_EINVAL;
        }
        *ret_n = n;
        return CM_OK;
}

static int check_buckets(const struct metric_desc *d, const double **ret_b, size_t *ret_n)
{
        const double *b = d->buckets ? d->buckets : metrics_default_buckets;
        size_t n = d->buckets ? d->n_buckets : METRICS_DEFAULT_BUCKETS_N;
        size_t i;

        if (n && isinf(b[n - 1]) && b[n - 1] > 0)
                n--;
        if (n > METRICS_MAX_BUCKETS)
                return CM_EINVAL;
        for (i = 0; i < n; i++)
                if (!isfinite(b[i]) || (i && !(b[i] > b[i - 1])))
                        return CM_EINVAL;
        *ret_b = b;
        *ret_n = n;
        return CM_OK;
}

/* ---- families and series (construction) ---- */

static uint64_t hash_key(const char *key, size_t len)
{
        uint64_t h = 1469598103934665603ULL;
        size_t i;

        for (i = 0; i < len; i++) {
                h ^= (unsigned char)key[i];
                h *= 1099511628211ULL;
        }
        return h;
}

static void table_rehash(struct metric_family *f, size_t n_slots)
{
        struct metric_series **slots = xcalloc(n_slots, sizeof(*slots));
        size_t i;

        for (i = 0; i < f->n_series; i++) {
                struct metric_series *s = f->order[i];
                size_t k = (size_t)(s->hash % n_slots);

                s->next = slots[k];
                slots[k] = s;
        }
        free(f->slots);
        f->slots = slots;
        f->n_slots = n_slots;
}

static struct metric_series *series_find_locked(const struct metric_family *f,
                                                const char *key,
                                                size_t len,
                                                uint64_t hash)
{
        struct metric_series *s;

        for (s = f->slots[hash % f->n_slots]; s; s = s->next)
                if (s->hash == hash && s->key_len == len && memcmp(s->key, key, len) == 0)
                        return s;
        return NULL;
}

static struct metric_series *series_insert_locked(struct metric_family *f,
                                                  const char *key,
                                                  size_t len,
                                                  uint64_t hash)
{
        size_t n_counts = f->type == METRIC_HISTOGRAM ? f->n_bounds + 1 : 0;
        struct metric_series *s = xcalloc(1, sizeof(*s) + n_counts * sizeof(s->counts[0]));
        size_t k;

        s->family = f;
        s->key = xmalloc(len + 1);
        memcpy(s->key, key, len);
        s->key[len] = '\0';
        s->key_len = len;
        s->hash = hash;
        atomic_init(&s->value, dbl_bits(0.0));
        for (k = 0; k < n_counts; k++)
                atomic_init(&s->counts[k], 0);
        if (f->n_series == f->cap_series) {
                f->cap_series = f->cap_series ? f->cap_series * 2 : INITIAL_SLOTS;
                f->order = xrealloc(f->order, f->cap_series * sizeof(*f->order));
        }
        f->order[f->n_series++] = s;
        if (f->n_series > f->n_slots - f->n_slots / 4) {
                table_rehash(f, f->n_slots * 2);
        } else {
                k = (size_t)(hash % f->n_slots);
                s->next = f->slots[k];
                f->slots[k] = s;
        }
        return s;
}

static void family_free(struct metric_family *f)
{
        size_t i;

        if (!f)
                return;
        for (i = 0; i < f->n_series; i++) {
                free(f->order[i]->key);
                free(f->order[i]);
        }
        for (i = 0; i < f->n_labels; i++)
                free(f->labels[i]);
        free(f->labels);
        free(f->order);
        free(f->slots);
        free(f->bounds);
        free(f->help);
        free(f->name);
        free(f);
}

static int family_validate(const struct metric_desc *d,
                           size_t *ret_labels,
                           const double **ret_b,
                           size_t *ret_nb)
{
        int r;

        if ((unsigned)d->type >= METRIC_TYPE_COUNT || !is_valid_name(d->name, true))
                return CM_EINVAL;
        r = check_labels(d->labels, d->type, ret_labels);
        if (r < 0 || d->type != METRIC_HISTOGRAM) {
                *ret_b = NULL;
                *ret_nb = 0;
                return r;
        }
        return check_buckets(d, ret_b, ret_nb);
}

/* Builds an unpublished family (with its only series when it has no labels). */
static int family_build(struct metrics *m, const struct metric_desc *d, struct metric_family **ret)
{
        struct metric_family *f;
        const double *bounds;
        size_t n_labels;
        size_t n_bounds;
        size_t i;
        int r;

        r = family_validate(d, &n_labels, &bounds, &n_bounds);
        if (r < 0)
                return r;
        f = xcalloc(1, sizeof(*f));
        f->type = d->type;
        f->owner = m;
        f->name = xstrdup(d->name);
        f->help = xstrdup(d->help ? d->help : "");
        f->labels = xcalloc(n_labels + 1, sizeof(*f->labels));
        for (i = 0; i < n_labels; i++)
                f->labels[i] = xstrdup(d->labels[i]);
        f->n_labels = n_labels;
        f->bounds = xcalloc(n_bounds + 1, sizeof(*f->bounds));
        if (n_bounds)
                memcpy(f->bounds, bounds, n_bounds * sizeof(*bounds));
        f->n_bounds = n_bounds;
        f->max_series = d->max_series ? d->max_series : METRICS_DEFAULT_MAX_SERIES;
        f->slots = xcalloc(INITIAL_SLOTS, sizeof(*f->slots));
        f->n_slots = INITIAL_SLOTS;
        if (!n_labels)
                (void)series_insert_locked(f, "", 0, hash_key("", 0));
        *ret = f;
        return CM_OK;
}

/* ---- registration ---- */

/* True when one name is a histogram's base name plus one of its reserved suffixes. */
static bool is_suffixed(const char *full, const char *base)
{
        size_t n = strlen(base);
        size_t i;

        if (strncmp(full, base, n) != 0)
                return false;
        for (i = 0; i < ARRAY_SIZE(histogram_suffixes); i++)
                if (strcmp(full + n, histogram_suffixes[i]) == 0)
                        return true;
        return false;
}

static bool family_equal(const struct metric_family *a, const struct metric_family *b)
{
        size_t i;

        if (a->type != b->type || a->n_labels != b->n_labels || a->n_bounds != b->n_bounds)
                return false;
        for (i = 0; i < a->n_labels; i++)
                if (strcmp(a->labels[i], b->labels[i]) != 0)
                        return false;
        return a->n_bounds == 0 ||
               memcmp(a->bounds, b->bounds, a->n_bounds * sizeof(*a->bounds)) == 0;
}

/* Finds a family to reuse (*ret_old set) or proves the name free (*ret_old NULL). */
static int family_lookup_locked(const struct metrics *m,
                                const struct metric_family *f,
                                struct metric_family **ret_old)
{
        size_t i;

        for (i = 0; i < m->n_families; i++) {
                struct metric_family *o = m->families[i];

                if (strcmp(o->name, f->name) == 0) {
                        if (!family_equal(o, f))
                                return CM_ECONFLICT;
                        *ret_old = o;
                        return CM_OK;
                }
                if ((o->type == METRIC_HISTOGRAM && is_suffixed(f->name, o->name)) ||
                    (f->type == METRIC_HISTOGRAM && is_suffixed(o->name, f->name)))
                        return CM_ECONFLICT;
        }
        *ret_old = NULL;
        return CM_OK;
}

int metrics_register(struct metrics *m, const struct metric_desc *d, struct metric_family **ret)
{
        struct metric_family *f = NULL;
        struct metric_family *old = NULL;
        int r;

        r = family_build(m, d, &f);
        if (r < 0)
                goto out;
        pthread_mutex_lock(&m->lock);
        r = family_lookup_locked(m, f, &old);
        if (r == 0 && !old) {
                if (m->n_families == m->cap_families) {
                        m->cap_families = m->cap_families ? m->cap_families * 2 : 16;
                        m->families = xrealloc(m->families, m->cap_families * sizeof(*m->families));
                }
                m->families[m->n_families++] = f;
                old = f;
                f = NULL;
        }
        pthread_mutex_unlock(&m->lock);
        if (r == 0)
                *ret = old;
out:
        family_free(f);
        return r;
}

int metrics_counter(struct metrics *m,
                    const char *name,
                    const char *help,
                    const char *const *labels,
                    struct metric_family **ret)
{
        struct metric_desc d = {
                .type = METRIC_COUNTER, .name = name, .help = help, .labels = labels
        };

        return metrics_register(m, &d, ret);
}

int metrics_gauge(struct metrics *m,
                  const char *name,
                  const char *help,
                  const char *const *labels,
                  struct metric_family **ret)
{
        struct metric_desc d = {
                .type = METRIC_GAUGE, .name = name, .help = help, .labels = labels
        };

        return metrics_register(m, &d, ret);
}

/* ---- series lookup ---- */

static int key_build(const struct metric_family *f,
                     const char *const *values,
                     char key[KEY_MAX],
                     size_t *ret_len)
{
        size_t len = 0;
        size_t i;

        for (i = 0; i < f->n_labels; i++) {
                size_t n;

                if (!values || !values[i])
                        return CM_EINVAL;
                n = strnlen(values[i], METRICS_MAX_LABEL_VALUE + 1);
                if (n > METRICS_MAX_LABEL_VALUE)
                        return CM_ETOOBIG;
                memcpy(key + len, values[i], n + 1);
                len += n + 1;
        }
        if (values && values[i])
                return CM_EINVAL;
        *ret_len = len;
        return CM_OK;
}

/* Get-or-create; ignore_cap lets the overflow series exist past max_series. */
static int series_get(struct metric_family *f,
                      const char *const *values,
                      bool ignore_cap,
                      struct metric_series **ret)
{
        char key[KEY_MAX];
        struct metric_series *s;
        uint64_t hash;
        size_t len = 0;
        int r;

        r = key_build(f, values, key, &len);
        if (r < 0)
                return r;
        hash = hash_key(key, len);
        pthread_mutex_lock(&f->owner->lock);
        s = series_find_locked(f, key, len, hash);
        if (!s && !ignore_cap && f->n_series >= f->max_series)
                r = CM_ETOOBIG;
        else if (!s)
                s = series_insert_locked(f, key, len, hash);
        pthread_mutex_unlock(&f->owner->lock);
        if (r == 0)
                *ret = s;
        return r;
}

int metric_series_get(struct metric_family *f,
                      const char *const *values,
                      struct metric_series **ret)
{
        return series_get(f, values, false, ret);
}

static struct metric_series *series_overflow(struct metric_family *f)
{
        const char *values[METRICS_MAX_LABELS + 1] = { NULL };
        struct metric_series *s = NULL;
        size_t i;
        int r;

        for (i = 0; i < f->n_labels; i++)
                values[i] = METRICS_OVERFLOW_VALUE;
        r = series_get(f, values, true, &s);
        assert(r == 0);
        (void)r;
        return s;
}

struct metric_series *metric_series_of(struct metric_family *f, const char *const *values)
{
        struct metric_series *s = NULL;
        int r;

        r = series_get(f, values, false, &s);
        assert(r != CM_EINVAL);
        /* Past the cap, and (should asserts be compiled out) on a wrong count: overflow. */
        if (r < 0)
                return series_overflow(f);
        return s;
}

bool metric_series_delete(struct metric_family *f, const char *const *values)
{
        char key[KEY_MAX];
        struct metric_series **at, *s = NULL;
        size_t len = 0;
        uint64_t hash;

        if (key_build(f, values, key, &len) < 0)
                return false;
        hash = hash_key(key, len);
        pthread_mutex_lock(&f->owner->lock);
        for (at = &f->slots[hash % f->n_slots]; *at; at = &(*at)->next)
                if ((*at)->hash == hash && (*at)->key_len == len &&
                    memcmp((*at)->key, key, len) == 0) {
                        s = *at;
                        *at = s->next;
                        break;
                }
        for (size_t i = 0; s && i < f->n_series; i++)
                if (f->order[i] == s) {
                        memmove(&f->order[i], &f->order[i + 1],
                                (f->n_series - i - 1) * sizeof(*f->order));
                        f->n_series--;
                        break;
                }
        pthread_mutex_unlock(&f->owner->lock);
        if (s) {
                free(s->key);
                free(s);
        }
        return s != NULL;
}

/* ---- lock-free updates ---- */

void metric_counter_add(struct metric_series *s, double v)
{
        assert(s->family->type == METRIC_COUNTER);
        if (!(v > 0))
                return;
        atomic_add_double(&s->value, v);
}

void metric_counter_inc(struct metric_series *s)
{
        metric_counter_add(s, 1.0);
}

void metric_counter_set(struct metric_series *s, double v)
{
        uint64_t old = atomic_load_explicit(&s->value, memory_order_relaxed);

        assert(s->family->type == METRIC_COUNTER);
        while (bits_dbl(old) < v)
                if (atomic_compare_exchange_weak_explicit(&s->value, &old, dbl_bits(v),
                                                          memory_order_relaxed,
                                                          memory_order_relaxed))
                        break;
}

void metric_gauge_set(struct metric_series *s, double v)
{
        assert(s->family->type == METRIC_GAUGE);
        atomic_store_explicit(&s->value, dbl_bits(v), memory_order_relaxed);
}

void metric_gauge_add(struct metric_series *s, double v)
{
        assert(s->family->type == METRIC_GAUGE);
        atomic_add_double(&s->value, v);
}

void metric_gauge_inc(struct metric_series *s)
{
        metric_gauge_add(s, 1.0);
}

void metric_gauge_dec(struct metric_series *s)
{
        metric_gauge_add(s, -1.0);
}

void metric_histogram_observe(struct metric_series *s, double v)
{
        const struct metric_family *f = s->family;
        size_t i = 0;

        assert(f->type == METRIC_HISTOGRAM);
        /* NaN compares false everywhere and lands in +Inf, as in the Go client. */
        while (i < f->n_bounds && !(v <= f->bounds[i]))
                i++;
        atomic_fetch_add_explicit(&s->counts[i], 1, memory_order_relaxed);
        atomic_add_double(&s->value, v);
}

double metric_series_value(const struct metric_series *s)
{
        return bits_dbl(atomic_load_explicit(&s->value, memory_order_relaxed));
}

/* ---- registry ---- */

int metrics_new(struct metrics **ret)
{
        struct metrics *m = xcalloc(1, sizeof(*m));

        pthread_mutex_init(&m->lock, NULL);
        *ret = m;
        return CM_OK;
}

struct metrics *metrics_free(struct metrics *m)
{
        size_t i;

        if (!m)
                return NULL;
        for (i = 0; i < m->n_collectors; i++)
                if (m->collectors[i].ud_free)
                        m->collectors[i].ud_free(m->collectors[i].ud);
        for (i = 0; i < m->n_families; i++)
                family_free(m->families[i]);
        free(m->families);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

int metrics_add_collector(struct metrics *m,
                          metrics_collector_fn *fn,
                          void *ud,
                          void (*ud_free)(void *ud))
{
        int r = CM_OK;

        pthread_mutex_lock(&m->lock);
        if (m->n_collectors == METRICS_MAX_COLLECTORS)
                r = CM_ETOOBIG;
        else
                m->collectors[m->n_collectors++] = (struct collector){ fn, ud, ud_free };
        pthread_mutex_unlock(&m->lock);
        return r;
}

/* ---- rendering ---- */

void metrics_format_double(double v, char out[METRICS_DOUBLE_LEN])
{
        int p;

        if (isnan(v)) {
                memcpy(out, "NaN", 4);
        } else if (isinf(v)) {
                memcpy(out, v > 0 ? "+Inf" : "-Inf", 5);
        } else if (v == 0) {
                memcpy(out, "0", 2); /* also -0, as the Go client prints it */
        } else if (fabs(v) <= 9007199254740992.0 && v == (double)(int64_t)v) {
                (void)snprintf(out, METRICS_DOUBLE_LEN, "%.0f", v);
        } else {
                /* %.15g is exact for most short decimals; widen only when needed. */
                for (p = 15; p <= 17; p++) {
                        (void)snprintf(out, METRICS_DOUBLE_LEN, "%.*g", p, v);
                        if (strtod(out, NULL) == v)
                                break;
                }
        }
}

/* Appends s escaping backslash and newline, and double quotes when quote is set. */
static int append_escaped(struct buf *out, const char *s, bool quote)
{
        const char *p;
        size_t n;
        int r = CM_OK;

        for (p = s; r == 0 && *p; p += n) {
                n = strcspn(p, quote ? "\\\n\"" : "\\\n");
                if (n) {
                        r = buf_append(out, p, n);
                        continue;
                }
                r = buf_append_str(out, *p == '\n' ? "\\n" : *p == '"' ? "\\\"" : "\\\\");
                n = 1;
        }
        return r;
}

static int append_pair(struct buf *out, bool first, const char *name, const char *value)
{
        int r;

        r = buf_printf(out, "%s%s=\"", first ? "" : ",", name);
        if (r == 0)
                r = append_escaped(out, value, true);
        if (r == 0)
                r = buf_append_str(out, "\"");
        return r;
}

/* Appends "{a="x",le="0.5"}", or nothing when there are no labels. */
static int append_labels(struct buf *out,
                         const struct metric_family *f,
                         const struct metric_series *s,
                         const char *le)
{
        const char *v = s->key;
        size_t i;
        int r;

        if (!f->n_labels && !le)
                return CM_OK;
        r = buf_append_str(out, "{");
        for (i = 0; r == 0 && i < f->n_labels; i++) {
                r = append_pair(out, i == 0, f->labels[i], v);
                v += strlen(v) + 1;
        }
        if (r == 0 && le)
                r = append_pair(out, f->n_labels == 0, "le", le);
        if (r == 0)
                r = buf_append_str(out, "}");
        return r;
}

static int append_sample(struct buf *out,
                         const struct metric_series *s,
                         const char *suffix,
                         const char *le,
                         const char *value)
{
        int r;

        r = buf_printf(out, "%s%s", s->family->name, suffix);
        if (r == 0)
                r = append_labels(out, s->family, s, le);
        if (r == 0)
                r = buf_printf(out, " %s\n", value);
        return r;
}

static int append_histogram(struct buf *out, const struct metric_series *s)
{
        const struct metric_family *f = s->family;
        char le[METRICS_DOUBLE_LEN];
        char val[METRICS_DOUBLE_LEN];
        uint64_t cum = 0;
        size_t i;
        int r = CM_OK;

        for (i = 0; r == 0 && i <= f->n_bounds; i++) {
                cum += atomic_load_explicit(&s->counts[i], memory_order_relaxed);
                if (i < f->n_bounds)
                        metrics_format_double(f->bounds[i], le);
                else
                        memcpy(le, "+Inf", 5);
                (void)snprintf(val, sizeof(val), "%" PRIu64, cum);
                r = append_sample(out, s, "_bucket", le, val);
        }
        metrics_format_double(metric_series_value(s), val);
        if (r == 0)
                r = append_sample(out, s, "_sum", NULL, val);
        (void)snprintf(val, sizeof(val), "%" PRIu64, cum);
        if (r == 0)
                r = append_sample(out, s, "_count", NULL, val);
        return r;
}

static int append_family_locked(struct buf *out, const struct metric_family *f)
{
        char val[METRICS_DOUBLE_LEN];
        size_t i;
        int r;

        if (!f->n_series)
                return CM_OK;
        r = buf_printf(out, "# HELP %s ", f->name);
        if (r == 0)
                r = append_escaped(out, f->help, false);
        if (r == 0)
                r = buf_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
        for (i = 0; r == 0 && i < f->n_series; i++) {
                if (f->type == METRIC_HISTOGRAM) {
                        r = append_histogram(out, f->order[i]);
                        continue;
                }
                metrics_format_double(metric_series_value(f->order[i]), val);
                r = append_sample(out, f->order[i], "", NULL, val);
        }
        return r;
}

int metrics_render(struct metrics *m, struct buf *out)
{
        size_t n;
        size_t i;
        int r = CM_OK;

        /* Collectors take the lock themselves (registration, series), so call them without
         * it; entries below n were written before n was raised under the lock. */
        pthread_mutex_lock(&m->lock);
        n = m->n_collectors;
        pthread_mutex_unlock(&m->lock);
        for (i = 0; i < n; i++)
                m->collectors[i].fn(m, m->collectors[i].ud);

        pthread_mutex_lock(&m->lock);
        for (i = 0; r == 0 && i < m->n_families; i++)
                r = append_family_locked(out, m->families[i]);
        pthread_mutex_unlock(&m->lock);
        return r;
}
