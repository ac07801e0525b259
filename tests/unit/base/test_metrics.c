/*
 * Tests for the Prometheus registry (metrics), the webhook series (http_metrics) and the
 * process collector (process_metrics). Rendered text is compared with golden strings and
 * every render is also checked line by line by a small exposition-format parser, since
 * promtool is not available here.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "metrics.h"
#include "process_metrics.h"
#include "webhook_metrics.h"

/* math.h gives float constants; -Wdouble-promotion wants them widened explicitly. */
#define DNAN       ((double)NAN)
#define DINF       ((double)INFINITY)
#define RENDER_MAX (1u << 22)
#define N_THREADS  8
#define N_ITERS    20000

/* ---- a minimal text-format checker ---- */

/* Consumes a metric (colon) or label name; NULL if none. */
static const char *skip_name(const char *p, bool colon)
{
        size_t n = metrics_name_span(p, colon);

        return n ? p + n : NULL;
}

/* Consumes a quoted label value with only \\, \" and \n escapes; NULL if malformed. */
static const char *skip_quoted(const char *p)
{
        if (*p++ != '"')
                return NULL;
        while (*p && *p != '"' && *p != '\n') {
                if (*p == '\\' && (p[1] == '\\' || p[1] == '"' || p[1] == 'n'))
                        p++;
                else if (*p == '\\')
                        return NULL;
                p++;
        }
        return *p == '"' ? p + 1 : NULL;
}

static const char *skip_labels(const char *p)
{
        if (*p != '{')
                return p;
        p++;
        while (p && *p != '}') {
                p = skip_name(p, false);
                if (!p || *p++ != '=')
                        return NULL;
                p = skip_quoted(p);
                if (p && *p == ',')
                        p++;
        }
        return p ? p + 1 : NULL;
}

static bool is_valid_value(const char *p, const char *eol)
{
        char tok[64];
        size_t n = (size_t)(eol - p);
        char *end;

        if (n == 0 || n >= sizeof(tok))
                return false;
        memcpy(tok, p, n);
        tok[n] = '\0';
        if (!strcmp(tok, "+Inf") || !strcmp(tok, "-Inf") || !strcmp(tok, "NaN"))
                return true;
        (void)strtod(tok, &end);
        return *end == '\0' && strchr("+-0123456789.", tok[0]);
}

static bool is_valid_comment(const char *line, const char *eol)
{
        const char *p;

        if (strncmp(line, "# HELP ", 7) == 0) {
                p = skip_name(line + 7, true);
                return p && (*p == ' ' || p == eol);
        }
        if (strncmp(line, "# TYPE ", 7) != 0)
                return false;
        p = skip_name(line + 7, true);
        return p && *p == ' ' &&
               (!strncmp(p + 1, "counter\n", 8) || !strncmp(p + 1, "gauge\n", 6) ||
                !strncmp(p + 1, "histogram\n", 10));
}

static bool is_valid_sample(const char *line, const char *eol)
{
        const char *p = skip_name(line, true);

        if (p)
                p = skip_labels(p);
        if (!p || *p != ' ')
                return false;
        return is_valid_value(p + 1, eol);
}

/* Returns the first malformed line (or the text when it does not end in a newline), or
 * NULL when every line is a HELP, TYPE or "name{labels} value" line. */
static const char *exposition_error(const char *text)
{
        const char *line;
        const char *eol;

        if (text[0] && text[strlen(text) - 1] != '\n')
                return text;
        for (line = text; *line; line = eol + 1) {
                eol = strchr(line, '\n');
                if (line[0] == '#' ? !is_valid_comment(line, eol) : !is_valid_sample(line, eol))
                        return line;
        }
        return NULL;
}

static void assert_valid_exposition(const char *text)
{
        const char *bad = exposition_error(text);

        if (bad)
                fail_msg("bad exposition line: %.*s", (int)strcspn(bad, "\n"), bad);
}

static void test_metrics__format_checker_rejects_malformed_lines(void **state)
{
        static const char *const bad[] = {
                "a 1",           "1a 1\n",           "a{b=\"c} 1\n",
                "a{b=c} 1\n",    "a{b=\"\\x\"} 1\n", "a{b=\"c\"} one\n",
                "a  1\n",        "a{-=\"c\"} 1\n",   "# TYPE a foo\n",
                "# HELP 1a x\n", "a{b=\"c\"}1\n",    "a\n",
        };
        size_t i;

        (void)state;
        assert_null(exposition_error("# HELP a x \\ y\n# TYPE a counter\na{b=\"\\\"\\n\",c=\"\"} "
                                     "+Inf\na 1e-07\na -2\na NaN\n"));
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (!exposition_error(bad[i]))
                        fail_msg("accepted: %s", bad[i]);
}

/* ---- helpers ---- */

static char *render(struct metrics *m)
{
        struct buf b;

        buf_init(&b, RENDER_MAX);
        assert_int_equal(metrics_render(m, &b), 0);
        assert_valid_exposition(b.data ? b.data : "");
        return buf_take(&b, NULL);
}

/* Value of the first sample line that starts with prefix followed by a space. */
static double sample_value(const char *text, const char *prefix)
{
        size_t n = strlen(prefix);
        const char *p;

        for (p = text; p && *p; p = strchr(p, '\n')) {
                if (*p == '\n')
                        p++;
                if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
                        return strtod(p + n + 1, NULL);
        }
        fail_msg("no sample %s", prefix);
        return DNAN;
}

static int setup(void **state)
{
        struct metrics *m = NULL;

        assert_int_equal(metrics_new(&m), 0);
        *state = m;
        return 0;
}

static int teardown(void **state)
{
        metrics_free(*state);
        return 0;
}

static struct metric_family *histogram(
        struct metrics *m, const char *name, const char *const *labels, const double *b, size_t n)
{
        struct metric_desc d = { .type = METRIC_HISTOGRAM,
                                 .name = name,
                                 .help = "Latency.",
                                 .labels = labels,
                                 .buckets = b,
                                 .n_buckets = n };
        struct metric_family *f = NULL;

        assert_int_equal(metrics_register(m, &d, &f), 0);
        return f;
}

/* ---- rendering ---- */

static void test_metrics__renders_counters_and_gauges_golden(void **state)
{
        static const char *const labels[] = { "method", "code", NULL };
        struct metric_family *c = NULL;
        struct metric_family *g = NULL;
        struct metric_family *empty = NULL;
        char *text;

        assert_int_equal(
                metrics_counter(*state, "capmaas_requests_total", "Requests served.", labels, &c),
                0);
        assert_int_equal(
                metrics_counter(*state, "capmaas_unused_total", "Never touched.", labels, &empty),
                0);
        assert_int_equal(metrics_gauge(*state, "capmaas_temperature", "Temperature.", NULL, &g), 0);
        metric_counter_add(metric_series(c, "GET", "200", NULL), 3);
        metric_counter_inc(metric_series(c, "POST", "500", NULL));
        metric_counter_inc(metric_series(c, "GET", "200", NULL));
        metric_counter_add(metric_series(c, "GET", "200", NULL), -5); /* ignored */
        metric_counter_add(metric_series(c, "GET", "200", NULL), DNAN);
        metric_gauge_set(metric_series(g, NULL), 20);
        metric_gauge_add(metric_series(g, NULL), 3.5);
        metric_gauge_inc(metric_series(g, NULL));
        metric_gauge_dec(metric_series(g, NULL));
        metric_gauge_dec(metric_series(g, NULL));

        text = render(*state);
        assert_string_equal(text, "# HELP capmaas_requests_total Requests served.\n"
                                  "# TYPE capmaas_requests_total counter\n"
                                  "capmaas_requests_total{method=\"GET\",code=\"200\"} 4\n"
                                  "capmaas_requests_total{method=\"POST\",code=\"500\"} 1\n"
                                  "# HELP capmaas_temperature Temperature.\n"
                                  "# TYPE capmaas_temperature gauge\n"
                                  "capmaas_temperature 22.5\n");
        free(text);
}

/* A deleted series is no longer rendered, the others keep their order and values, and the
 * same labels later start a new series from zero. */
static void test_metrics__deleted_series_are_gone(void **state)
{
        static const char *const labels[] = { "identity", NULL };
        struct metric_family *c = NULL;
        char *text;

        assert_int_equal(metrics_counter(*state, "capmaas_x_total", "X.", labels, &c), 0);
        for (int i = 0; i < 40; i++) { /* past the first rehash */
                char v[16];

                snprintf(v, sizeof(v), "ns/s%d", i);
                metric_counter_add(metric_series(c, v), i + 1);
        }
        for (int i = 0; i < 40; i++) {
                char v[16];

                snprintf(v, sizeof(v), "ns/s%d", i);
                if (i != 2)
                        assert_true(metric_series_delete(c, (const char *const[]){ v, NULL }));
        }
        assert_false(metric_series_delete(c, (const char *const[]){ "ns/s0", NULL }));
        metric_counter_inc(metric_series(c, "ns/s7"));
        text = render(*state);
        assert_string_equal(text, "# HELP capmaas_x_total X.\n"
                                  "# TYPE capmaas_x_total counter\n"
                                  "capmaas_x_total{identity=\"ns/s2\"} 3\n"
                                  "capmaas_x_total{identity=\"ns/s7\"} 1\n");
        free(text);
}

static void test_metrics__renders_histogram_cumulative_with_inf(void **state)
{
        static const char *const labels[] = { "webhook", NULL };
        static const double b[] = { 0.1, 1, 10, DINF };
        struct metric_family *h = histogram(*state, "capmaas_latency_seconds", labels, b, 4);
        struct metric_series *s = metric_series(h, "/validate", NULL);
        char *text;

        metric_histogram_observe(s, 0.0625);
        metric_histogram_observe(s, 0.5);
        metric_histogram_observe(s, 1); /* le is inclusive */
        metric_histogram_observe(s, 20);
        text = render(*state);
        assert_string_equal(text,
                            "# HELP capmaas_latency_seconds Latency.\n"
                            "# TYPE capmaas_latency_seconds histogram\n"
                            "capmaas_latency_seconds_bucket{webhook=\"/validate\",le=\"0.1\"} 1\n"
                            "capmaas_latency_seconds_bucket{webhook=\"/validate\",le=\"1\"} 3\n"
                            "capmaas_latency_seconds_bucket{webhook=\"/validate\",le=\"10\"} 3\n"
                            "capmaas_latency_seconds_bucket{webhook=\"/validate\",le=\"+Inf\"} 4\n"
                            "capmaas_latency_seconds_sum{webhook=\"/validate\"} 21.5625\n"
                            "capmaas_latency_seconds_count{webhook=\"/validate\"} 4\n");
        free(text);
}

static void test_metrics__histogram_without_labels_and_default_buckets(void **state)
{
        struct metric_family *h = histogram(*state, "plain_seconds", NULL, NULL, 0);
        char *text;

        metric_histogram_observe(metric_series(h, NULL), 0.3);
        metric_histogram_observe(metric_series(h, NULL), DNAN); /* counted in +Inf only */
        text = render(*state);
        assert_non_null(strstr(text, "plain_seconds_bucket{le=\"0.005\"} 0\n"
                                     "plain_seconds_bucket{le=\"0.01\"} 0\n"));
        assert_non_null(strstr(text, "plain_seconds_bucket{le=\"0.25\"} 0\n"
                                     "plain_seconds_bucket{le=\"0.5\"} 1\n"));
        assert_non_null(strstr(text, "plain_seconds_bucket{le=\"10\"} 1\n"
                                     "plain_seconds_bucket{le=\"+Inf\"} 2\n"
                                     "plain_seconds_sum NaN\n"
                                     "plain_seconds_count 2\n"));
        free(text);
}

static void test_metrics__escapes_label_values_and_help(void **state)
{
        static const char *const labels[] = { "path", NULL };
        struct metric_family *c = NULL;
        char *text;

        assert_int_equal(metrics_counter(*state, "esc_total",
                                         "Back\\slash, \"quotes\"\nand newline.", labels, &c),
                         0);
        metric_counter_inc(metric_series(c, "a\\b\"c\nd", NULL));
        text = render(*state);
        assert_string_equal(text, "# HELP esc_total Back\\\\slash, \"quotes\"\\nand newline.\n"
                                  "# TYPE esc_total counter\n"
                                  "esc_total{path=\"a\\\\b\\\"c\\nd\"} 1\n");
        free(text);
}

static void test_metrics__formats_doubles_like_prometheus(void **state)
{
        static const struct {
                double v;
                const char *want;
        } cases[] = {
                { 0, "0" },        { -0.0, "0" },      { 1, "1" },
                { -3, "-3" },      { 1e6, "1000000" }, { 123456789012, "123456789012" },
                { 0.1, "0.1" },    { 2.5, "2.5" },     { 0.005, "0.005" },
                { 1e-7, "1e-07" }, { 1e20, "1e+20" },  { 0.1 + 0.2, "0.30000000000000004" },
                { DNAN, "NaN" },   { DINF, "+Inf" },   { -DINF, "-Inf" },
        };

        char out[METRICS_DOUBLE_LEN];
        size_t i;

        (void)state;
        for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                metrics_format_double(cases[i].v, out);
                assert_string_equal(out, cases[i].want);
        }
}

static void test_metrics__render_respects_buffer_cap(void **state)
{
        struct metric_family *c = NULL;
        struct buf b;

        assert_int_equal(
                metrics_counter(*state, "capped_total", "A fairly long help text.", NULL, &c), 0);
        buf_init(&b, 16);
        assert_int_equal(metrics_render(*state, &b), CM_ETOOBIG);
        buf_release(&b);
}

/* ---- registration ---- */

static void test_metrics__registration_is_idempotent(void **state)
{
        static const char *const labels[] = { "a", "b", NULL };
        struct metric_family *f1 = NULL;
        struct metric_family *f2 = NULL;
        struct metric_family *h1;
        struct metric_family *h2;

        assert_int_equal(metrics_counter(*state, "same_total", "Help.", labels, &f1), 0);
        assert_int_equal(metrics_counter(*state, "same_total", "Other help.", labels, &f2), 0);
        assert_ptr_equal(f1, f2);
        h1 = histogram(*state, "same_seconds", labels, metrics_reconcile_buckets,
                       METRICS_RECONCILE_BUCKETS_N);
        h2 = histogram(*state, "same_seconds", labels, metrics_reconcile_buckets,
                       METRICS_RECONCILE_BUCKETS_N);
        assert_ptr_equal(h1, h2);
        assert_ptr_equal(metric_series(f1, "x", "y", NULL), metric_series(f2, "x", "y"));
}

static void test_metrics__conflicting_registration_fails(void **state)
{
        static const char *const ab[] = { "a", "b", NULL };
        static const char *const ba[] = { "b", "a", NULL };
        static const double other[] = { 1, 2 };
        struct metric_desc d = { .type = METRIC_HISTOGRAM,
                                 .name = "lat_seconds",
                                 .labels = ab,
                                 .buckets = other,
                                 .n_buckets = 2 };
        struct metric_family *f = NULL;
        struct metric_family *keep = NULL;

        assert_int_equal(metrics_counter(*state, "c_total", "", ab, &keep), 0);
        f = keep;
        assert_int_equal(metrics_counter(*state, "c_total", "", ba, &f), CM_ECONFLICT);
        assert_int_equal(metrics_counter(*state, "c_total", "", NULL, &f), CM_ECONFLICT);
        assert_int_equal(metrics_gauge(*state, "c_total", "", ab, &f), CM_ECONFLICT);
        assert_ptr_equal(f, keep); /* untouched on failure */
        (void)histogram(*state, "lat_seconds", ab, NULL, 0);
        assert_int_equal(metrics_register(*state, &d, &f), CM_ECONFLICT);
        /* A histogram's series names are reserved both ways. */
        assert_int_equal(metrics_counter(*state, "lat_seconds_count", "", NULL, &f), CM_ECONFLICT);
        assert_int_equal(metrics_gauge(*state, "x_sum", "", NULL, &f), 0);
        d.name = "x";
        assert_int_equal(metrics_register(*state, &d, &f), CM_ECONFLICT);
}

static void test_metrics__invalid_names_are_rejected(void **state)
{
        static const char *const bad_names[] = { "", "1abc", "a-b", "a b", "é" };
        static const char *const bad_labels[][3] = {
                { "__reserved", NULL }, { "1a", NULL }, { "a:b", NULL },
                { "a", "a", NULL },     { "", NULL },
        };
        static const char *const le[] = { "le", NULL };
        static const double unsorted[] = { 1, 0.5 };
        static const double nan[] = { DNAN };
        struct metric_desc d = { .type = METRIC_HISTOGRAM, .name = "h", .labels = le };
        struct metric_family *f = NULL;
        size_t i;

        for (i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
                assert_int_equal(metrics_counter(*state, bad_names[i], "", NULL, &f), CM_EINVAL);
        for (i = 0; i < sizeof(bad_labels) / sizeof(bad_labels[0]); i++)
                assert_int_equal(metrics_counter(*state, "ok_total", "", bad_labels[i], &f),
                                 CM_EINVAL);
        assert_int_equal(metrics_register(*state, &d, &f), CM_EINVAL); /* "le" on a histogram */
        d.labels = NULL;
        d.buckets = unsorted;
        d.n_buckets = 2;
        assert_int_equal(metrics_register(*state, &d, &f), CM_EINVAL);
        d.buckets = nan;
        d.n_buckets = 1;
        assert_int_equal(metrics_register(*state, &d, &f), CM_EINVAL);
        assert_null(f);
        assert_int_equal(metrics_counter(*state, "ns:sub_total", "", le, &f), 0);
}

/* ---- series ---- */

static void test_metrics__series_get_checks_values(void **state)
{
        static const char *const labels[] = { "a", "b", NULL };
        static const char *const one[] = { "x", NULL };
        static const char *const three[] = { "x", "y", "z", NULL };
        char long_value[METRICS_MAX_LABEL_VALUE + 2];
        const char *too_long[] = { "x", long_value, NULL };
        struct metric_family *f = NULL;
        struct metric_series *s = NULL;

        memset(long_value, 'v', sizeof(long_value) - 1);
        long_value[sizeof(long_value) - 1] = '\0';
        assert_int_equal(metrics_counter(*state, "v_total", "", labels, &f), 0);
        assert_int_equal(metric_series_get(f, one, &s), CM_EINVAL);
        assert_int_equal(metric_series_get(f, three, &s), CM_EINVAL);
        assert_int_equal(metric_series_get(f, NULL, &s), CM_EINVAL);
        assert_int_equal(metric_series_get(f, too_long, &s), CM_ETOOBIG);
        assert_null(s);
        long_value[METRICS_MAX_LABEL_VALUE] = '\0'; /* exactly at the limit is fine */
        assert_int_equal(metric_series_get(f, too_long, &s), 0);
        assert_ptr_equal(s, metric_series(f, "x", long_value, NULL));
}

static void test_metrics__cardinality_cap_uses_overflow_series(void **state)
{
        static const char *const labels[] = { "k", NULL };
        static const char *const d_values[] = { "d", NULL };
        struct metric_desc d = {
                .type = METRIC_COUNTER, .name = "capped_total", .labels = labels, .max_series = 3
        };
        struct metric_family *f = NULL;
        struct metric_series *s = NULL;
        struct metric_series *a;
        char *text;

        assert_int_equal(metrics_register(*state, &d, &f), 0);
        a = metric_series(f, "a", NULL);
        (void)metric_series(f, "b", NULL);
        (void)metric_series(f, "c", NULL);
        assert_int_equal(metric_series_get(f, d_values, &s), CM_ETOOBIG);
        assert_null(s);
        metric_counter_inc(metric_series(f, "d", NULL));
        metric_counter_inc(metric_series(f, "e", NULL));
        assert_ptr_equal(metric_series(f, "a", NULL), a);
        text = render(*state);
        assert_null(strstr(text, "k=\"d\""));
        assert_non_null(strstr(text, "capped_total{k=\"c\"} 0\n"
                                     "capped_total{k=\"_overflow\"} 2\n"));
        free(text);
}

static void test_metrics__default_cap_is_ten_thousand(void **state)
{
        static const char *const labels[] = { "id", NULL };
        struct metric_family *f = NULL;
        struct metric_series *s = NULL;
        char id[16];
        const char *values[] = { id, NULL };
        int i;

        assert_int_equal(metrics_gauge(*state, "many", "", labels, &f), 0);
        for (i = 0; i < METRICS_DEFAULT_MAX_SERIES; i++) {
                (void)snprintf(id, sizeof(id), "%d", i);
                assert_int_equal(metric_series_get(f, values, &s), 0);
                metric_gauge_set(s, i);
        }
        (void)snprintf(id, sizeof(id), "%d", 1234);
        assert_int_equal(metric_series_get(f, values, &s), 0); /* existing still found */
        assert_true(metric_series_value(s) == 1234);
        (void)snprintf(id, sizeof(id), "%d", METRICS_DEFAULT_MAX_SERIES);
        assert_int_equal(metric_series_get(f, values, &s), CM_ETOOBIG);
}

/* ---- concurrency ---- */

struct worker {
        pthread_barrier_t *barrier;
        struct metric_family *c;
        struct metric_family *g;
        struct metric_family *h;
        int id;
};

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        struct metric_series *c;
        struct metric_series *g;
        struct metric_series *h;
        char own[16];
        int i;

        (void)snprintf(own, sizeof(own), "t%d", w->id);
        (void)pthread_barrier_wait(w->barrier);
        /* Racing creation of the same series must yield one series. */
        c = metric_series(w->c, "shared", NULL);
        g = metric_series(w->g, NULL);
        h = metric_series(w->h, NULL);
        for (i = 0; i < N_ITERS; i++) {
                metric_counter_inc(c);
                metric_counter_add(metric_series(w->c, own, NULL), 0.5);
                metric_gauge_add(g, i % 2 ? 3 : -1);
                metric_histogram_observe(h, i % 2 ? 0.25 : 2);
        }
        return NULL;
}

static void test_metrics__concurrent_updates_sum_exactly(void **state)
{
        static const char *const labels[] = { "t", NULL };
        static const double b[] = { 1 };
        struct worker w[N_THREADS];
        pthread_t th[N_THREADS];
        pthread_barrier_t barrier;
        struct metric_family *c = NULL;
        struct metric_family *g = NULL;
        char *text;
        int i;

        assert_int_equal(metrics_counter(*state, "conc_total", "", labels, &c), 0);
        assert_int_equal(metrics_gauge(*state, "conc_gauge", "", NULL, &g), 0);
        assert_int_equal(pthread_barrier_init(&barrier, NULL, N_THREADS + 1), 0);
        for (i = 0; i < N_THREADS; i++) {
                w[i] = (struct worker){ &barrier, c, g, histogram(*state, "conc", NULL, b, 1), i };
                assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
        }
        (void)pthread_barrier_wait(&barrier);
        free(render(*state)); /* a scrape racing the updates stays well-formed */
        for (i = 0; i < N_THREADS; i++)
                assert_int_equal(pthread_join(th[i], NULL), 0);
        pthread_barrier_destroy(&barrier);

        text = render(*state);
        assert_true(sample_value(text, "conc_total{t=\"shared\"}") == N_THREADS * N_ITERS);
        assert_true(sample_value(text, "conc_total{t=\"t7\"}") == N_ITERS / 2);
        assert_true(sample_value(text, "conc_gauge") == N_THREADS * N_ITERS);
        assert_true(sample_value(text, "conc_bucket{le=\"1\"}") == N_THREADS * N_ITERS / 2);
        assert_true(sample_value(text, "conc_count") == N_THREADS * N_ITERS);
        assert_true(sample_value(text, "conc_sum") == N_THREADS * N_ITERS / 2 * 2.25);
        free(text);
}

/* ---- collectors ---- */

struct probe {
        struct metric_series *g;
        int calls;
        bool *freed;
};

static void probe_collect(struct metrics *m, void *ud)
{
        struct probe *p = ud;

        (void)m;
        p->calls++;
        metric_gauge_set(p->g, 100 + p->calls);
}

static void probe_free(void *ud)
{
        struct probe *p = ud;

        *p->freed = true;
        free(p);
}

static void test_metrics__collectors_run_at_render_and_are_freed(void **state)
{
        struct metrics *m = NULL;
        struct metric_family *f = NULL;
        struct probe *p = calloc(1, sizeof(*p));
        bool freed = false;
        char *text;

        (void)state;
        assert_non_null(p);
        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_gauge(m, "sampled", "Sampled.", NULL, &f), 0);
        p->g = metric_series(f, NULL);
        p->freed = &freed;
        assert_int_equal(metrics_add_collector(m, probe_collect, p, probe_free), 0);
        assert_int_equal(p->calls, 0);
        text = render(m);
        assert_non_null(strstr(text, "sampled 101\n"));
        free(text);
        text = render(m);
        assert_non_null(strstr(text, "sampled 102\n"));
        free(text);
        assert_int_equal(p->calls, 2);
        assert_false(freed);
        m = metrics_free(m);
        assert_null(m);
        assert_true(freed);
}

static void noop_collect(struct metrics *m, void *ud)
{
        (void)m;
        (void)ud;
}

static void test_metrics__collector_count_is_capped(void **state)
{
        int i;

        for (i = 0; i < METRICS_MAX_COLLECTORS; i++)
                assert_int_equal(metrics_add_collector(*state, noop_collect, NULL, NULL), 0);
        assert_int_equal(metrics_add_collector(*state, noop_collect, NULL, NULL), CM_ETOOBIG);
}

/* ---- process and webhook metrics ---- */

static void test_metrics__process_metrics_are_plausible(void **state)
{
        double rss, vsize, fds, max_fds, start, cpu;
        time_t now = time(NULL);
        char *text;

        assert_int_equal(process_metrics_register(*state), 0);
        text = render(*state);
        rss = sample_value(text, "process_resident_memory_bytes");
        vsize = sample_value(text, "process_virtual_memory_bytes");
        fds = sample_value(text, "process_open_fds");
        max_fds = sample_value(text, "process_max_fds");
        start = sample_value(text, "process_start_time_seconds");
        cpu = sample_value(text, "process_cpu_seconds_total");
        assert_true(rss > 0);
        assert_true(vsize >= rss);
        assert_true(fds >= 3); /* stdin, stdout, stderr */
        assert_true(max_fds >= fds);
        assert_true(start > (double)now - 3600 && start <= (double)now + 5);
        assert_true(cpu >= 0);
        assert_non_null(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
        free(text);
}

static void test_metrics__webhook_metrics_registered(void **state)
{
        struct webhook_metrics w1;
        struct webhook_metrics w2;
        char *text;

        assert_int_equal(webhook_metrics_register(*state, &w1), 0);
        assert_int_equal(webhook_metrics_register(*state, &w2), 0);
        assert_memory_equal(&w1, &w2, sizeof(w1));
        metric_counter_inc(metric_series(w1.requests, "/validate-maasmachine", "200", NULL));
        metric_histogram_observe(metric_series(w1.latency, "/validate-maasmachine", NULL), 0.002);
        metric_gauge_inc(metric_series(w1.in_flight, "/validate-maasmachine", NULL));
        metric_counter_inc(w1.cert_reads);
        text = render(*state);
        assert_non_null(strstr(text, "controller_runtime_webhook_requests_total{webhook=\"/"
                                     "validate-maasmachine\",code=\"200\"} 1\n"));
        assert_non_null(strstr(text, "controller_runtime_webhook_latency_seconds_bucket{webhook=\"/"
                                     "validate-maasmachine\",le=\"0.005\"} 1\n"));
        assert_non_null(strstr(text, "controller_runtime_webhook_latency_seconds_bucket{webhook=\"/"
                                     "validate-maasmachine\",le=\"10\"} 1\n"));
        assert_non_null(strstr(text, "controller_runtime_webhook_requests_in_flight{webhook=\"/"
                                     "validate-maasmachine\"} 1\n"));
        assert_non_null(strstr(text, "\ncontroller_runtime_webhook_panics_total 0\n"));
        assert_non_null(strstr(text, "\ncertwatcher_read_certificate_total 1\n"));
        assert_non_null(strstr(text, "\ncertwatcher_read_certificate_errors_total 0\n"));
        free(text);
}

static void test_metrics__reconcile_buckets_match_controller_runtime(void **state)
{
        (void)state;
        assert_true(metrics_reconcile_buckets[0] == 0.005);
        assert_true(metrics_reconcile_buckets[17] == 1.0);
        assert_true(metrics_reconcile_buckets[METRICS_RECONCILE_BUCKETS_N - 1] == 60);
        assert_true(metrics_default_buckets[0] == 0.005);
        assert_true(metrics_default_buckets[METRICS_DEFAULT_BUCKETS_N - 1] == 10);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_metrics__format_checker_rejects_malformed_lines),
                T(test_metrics__renders_counters_and_gauges_golden),
                T(test_metrics__deleted_series_are_gone),
                T(test_metrics__renders_histogram_cumulative_with_inf),
                T(test_metrics__histogram_without_labels_and_default_buckets),
                T(test_metrics__escapes_label_values_and_help),
                T(test_metrics__formats_doubles_like_prometheus),
                T(test_metrics__render_respects_buffer_cap),
                T(test_metrics__registration_is_idempotent),
                T(test_metrics__conflicting_registration_fails),
                T(test_metrics__invalid_names_are_rejected),
                T(test_metrics__series_get_checks_values),
                T(test_metrics__cardinality_cap_uses_overflow_series),
                T(test_metrics__default_cap_is_ten_thousand),
                T(test_metrics__concurrent_updates_sum_exactly),
                T(test_metrics__collectors_run_at_render_and_are_freed),
                T(test_metrics__collector_count_is_capped),
                T(test_metrics__process_metrics_are_plausible),
                T(test_metrics__webhook_metrics_registered),
                T(test_metrics__reconcile_buckets_match_controller_runtime),
        };
#undef T

        return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
