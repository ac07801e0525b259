/*
 * Unit: the watch stream framer and event decoder (reconcile/kube_priv.h), and the
 * Status → error mapping shared with the REST verbs. No network.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../kube/kube_priv.h"
#include "err.h"
#include "kube_client.h"
#include "xalloc.h"

/* --- framer ----------------------------------------------------------------------------- */

struct lines {
        char *got[16];
        size_t n;
        int stop_at; /* return 7 when this many lines were seen; 0 = never */
};

static int collect(void *arg, const char *line, size_t len)
{
        struct lines *l = arg;

        assert_true(l->n < 16);
        l->got[l->n++] = xstrndup(line, len);
        return l->stop_at && (int)l->n == l->stop_at ? 7 : 0;
}

static void lines_free(struct lines *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->got[i]);
}

static void test_framer__lines_split_across_one_byte_chunks(void **state)
{
        const char *in = "{\"a\":1}\n{\"b\":2}\r\n\n{\"c\":3}\n";
        struct kube_framer f;
        struct lines l = { 0 };

        (void)state;
        kube_framer_init(&f, 64);
        for (size_t i = 0; in[i]; i++)
                assert_int_equal(kube_framer_feed(&f, in + i, 1, collect, &l), 0);
        assert_int_equal(l.n, 3);
        assert_string_equal(l.got[0], "{\"a\":1}");
        assert_string_equal(l.got[1], "{\"b\":2}"); /* CR dropped */
        assert_string_equal(l.got[2], "{\"c\":3}"); /* empty line skipped */
        assert_int_equal(kube_framer_pending(&f), 0);
        lines_free(&l);
        kube_framer_release(&f);
}

static void test_framer__many_lines_in_one_chunk_and_a_tail_kept(void **state)
{
        const char *in = "one\ntwo\nthr";
        struct kube_framer f;
        struct lines l = { 0 };

        (void)state;
        kube_framer_init(&f, 64);
        assert_int_equal(kube_framer_feed(&f, in, strlen(in), collect, &l), 0);
        assert_int_equal(l.n, 2);
        assert_int_equal(kube_framer_pending(&f), 3);
        assert_int_equal(kube_framer_feed(&f, "ee\nfour", 7, collect, &l), 0);
        assert_int_equal(l.n, 3);
        assert_string_equal(l.got[2], "three");
        assert_int_equal(kube_framer_pending(&f), 4);
        lines_free(&l);
        kube_framer_release(&f);
}

static void test_framer__line_over_the_cap_is_too_big(void **state)
{
        struct kube_framer f;
        struct lines l = { 0 };
        char big[40];

        (void)state;
        memset(big, 'x', sizeof(big));
        kube_framer_init(&f, 16);
        /* exactly at the cap is fine, across two chunks */
        assert_int_equal(kube_framer_feed(&f, big, 10, collect, &l), 0);
        assert_int_equal(kube_framer_feed(&f, big, 6, collect, &l), 0);
        assert_int_equal(kube_framer_feed(&f, "\n", 1, collect, &l), 0);
        assert_int_equal(l.n, 1);
        assert_int_equal(strlen(l.got[0]), 16);
        /* one byte more is not, whether it arrives in one chunk or in pieces */
        assert_int_equal(kube_framer_feed(&f, big, 17, collect, &l), CM_ETOOBIG);
        kube_framer_release(&f);
        kube_framer_init(&f, 16);
        assert_int_equal(kube_framer_feed(&f, big, 9, collect, &l), 0);
        assert_int_equal(kube_framer_feed(&f, big, 8, collect, &l), CM_ETOOBIG);
        assert_int_equal(l.n, 1);
        lines_free(&l);
        kube_framer_release(&f);
}

static void test_framer__callback_result_stops_framing(void **state)
{
        const char *in = "a\nb\nc\n";
        struct kube_framer f;
        struct lines l = { .stop_at = 2 };

        (void)state;
        kube_framer_init(&f, 16);
        assert_int_equal(kube_framer_feed(&f, in, strlen(in), collect, &l), 7);
        assert_int_equal(l.n, 2);
        lines_free(&l);
        kube_framer_release(&f);
}

/* --- decoder ---------------------------------------------------------------------------- */

struct events {
        enum kube_watch_event type[8];
        char *rv[8];
        size_t n;
        size_t stop_after; /* 0 = never */
};

static int on_event(void *arg, enum kube_watch_event type, cJSON *obj)
{
        struct events *ev = arg;
        const char *rv = kube_meta_str(obj, "resourceVersion");

        assert_true(ev->n < 8);
        ev->type[ev->n] = type;
        ev->rv[ev->n] = rv ? xstrdup(rv) : NULL;
        ev->n++;
        cJSON_Delete(obj);
        return ev->stop_after && ev->n == ev->stop_after;
}

static void events_free(struct events *ev)
{
        for (size_t i = 0; i < ev->n; i++)
                free(ev->rv[i]);
}

static int feed(struct kube_watch_decoder *d, const char *line)
{
        return kube_watch_decode_line(d, line, strlen(line));
}

static void test_decode__event_types_in_order(void **state)
{
        struct events ev = { 0 };
        struct kube_error e = { 0 };
        struct kube_watch_decoder d = { .fn = on_event, .arg = &ev, .e = &e };

        (void)state;
        assert_int_equal(feed(&d, "{\"type\":\"ADDED\",\"object\":{\"metadata\":"
                                  "{\"resourceVersion\":\"5\"}}}"),
                         0);
        assert_int_equal(feed(&d, "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":"
                                  "{\"resourceVersion\":\"6\"}}}"),
                         0);
        assert_int_equal(feed(&d, "{\"type\":\"DELETED\",\"object\":{\"metadata\":"
                                  "{\"resourceVersion\":\"7\"}}}"),
                         0);
        assert_int_equal(feed(&d, "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":"
                                  "{\"resourceVersion\":\"9\"}}}"),
                         0);
        assert_int_equal(ev.n, 4);
        assert_int_equal(ev.type[0], KUBE_WATCH_ADDED);
        assert_int_equal(ev.type[1], KUBE_WATCH_MODIFIED);
        assert_int_equal(ev.type[2], KUBE_WATCH_DELETED);
        assert_int_equal(ev.type[3], KUBE_WATCH_BOOKMARK);
        assert_string_equal(ev.rv[3], "9");
        assert_string_equal(d.last_rv, "9");
        assert_int_equal(d.result, 0);
        free(d.last_rv);
        events_free(&ev);
        kube_error_release(&e);
}

static void test_decode__error_410_is_gone_with_the_status_copied(void **state)
{
        struct events ev = { 0 };
        struct kube_error e = { 0 };
        struct kube_watch_decoder d = { .fn = on_event, .arg = &ev, .e = &e };

        (void)state;
        assert_int_equal(feed(&d, "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
                                  "\"code\":410,\"reason\":\"Expired\",\"message\":\"too old "
                                  "resource version: 1 (5)\"}}"),
                         1);
        assert_int_equal(d.result, CM_EGONE);
        assert_int_equal(e.http_status, 410);
        assert_string_equal(e.reason, "Expired");
        assert_string_equal(e.message, "too old resource version: 1 (5)");
        assert_int_equal(ev.n, 0);
        kube_error_release(&e);
}

static void test_decode__error_500_and_malformed_lines(void **state)
{
        struct events ev = { 0 };
        struct kube_error e = { 0 };
        struct kube_watch_decoder d = { .fn = on_event, .arg = &ev, .e = &e };

        (void)state;
        assert_int_equal(feed(&d, "{\"type\":\"ERROR\",\"object\":{\"code\":500}}"), 1);
        assert_int_equal(d.result, CM_ESERVER);
        assert_int_equal(feed(&d, "{\"type\":\"ADDED\""), 1);
        assert_int_equal(d.result, CM_EPARSE);
        assert_int_equal(feed(&d, "{\"type\":\"RENAMED\",\"object\":{}}"), 1);
        assert_int_equal(d.result, CM_EPARSE);
        assert_int_equal(feed(&d, "{\"type\":\"ADDED\",\"object\":\"x\"}"), 1);
        assert_int_equal(d.result, CM_EPARSE);
        assert_int_equal(ev.n, 0);
        kube_error_release(&e);
}

static void test_decode__callback_stop_is_not_an_error(void **state)
{
        struct events ev = { .stop_after = 1 };
        struct kube_watch_decoder d = { .fn = on_event, .arg = &ev };

        (void)state;
        assert_int_equal(feed(&d, "{\"type\":\"ADDED\",\"object\":{}}"), 1);
        assert_true(d.callback_stopped);
        assert_int_equal(d.result, 0);
        events_free(&ev);
}

static void test_decode__framed_stream_end_to_end(void **state)
{
        const char *in = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":"
                         "\"1\"}}}\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{"
                         "\"resourceVersion\":\"2\"}}}\n";
        struct events ev = { 0 };
        struct kube_watch_decoder d = { .fn = on_event, .arg = &ev };
        struct kube_framer f;

        (void)state;
        kube_framer_init(&f, 1024);
        for (size_t i = 0, n = strlen(in); i < n; i += 5)
                assert_int_equal(kube_framer_feed(&f, in + i, n - i < 5 ? n - i : 5,
                                                  kube_watch_decode_line, &d),
                                 0);
        assert_int_equal(ev.n, 2);
        assert_int_equal(ev.type[1], KUBE_WATCH_BOOKMARK);
        free(d.last_rv);
        events_free(&ev);
        kube_framer_release(&f);
}

/* --- Status mapping ------------------------------------------------------------------------ */

static void test_status__codes_and_reasons_map_to_errors(void **state)
{
        (void)state;
        assert_int_equal(kube_err_from_status(200, NULL), 0);
        assert_int_equal(kube_err_from_status(400, "BadRequest"), CM_EINVAL);
        assert_int_equal(kube_err_from_status(401, NULL), CM_EUNAUTHORIZED);
        assert_int_equal(kube_err_from_status(403, NULL), CM_EFORBIDDEN);
        assert_int_equal(kube_err_from_status(404, "NotFound"), CM_ENOTFOUND);
        assert_int_equal(kube_err_from_status(409, "AlreadyExists"), CM_EEXIST);
        assert_int_equal(kube_err_from_status(409, "Conflict"), CM_ECONFLICT);
        assert_int_equal(kube_err_from_status(410, "Expired"), CM_EGONE);
        assert_int_equal(kube_err_from_status(415, NULL), CM_EUNSUPPORTED);
        assert_int_equal(kube_err_from_status(422, "Invalid"), CM_EINVAL);
        assert_int_equal(kube_err_from_status(429, NULL), CM_ESERVER);
        assert_int_equal(kube_err_from_status(500, NULL), CM_ESERVER);
        assert_int_equal(kube_err_from_status(503, NULL), CM_ESERVER);
        assert_int_equal(kube_err_from_status(504, NULL), CM_ETIMEDOUT);
}

static void test_status__causes_are_copied_and_reset(void **state)
{
        cJSON *st = cJSON_Parse("{\"kind\":\"Status\",\"reason\":\"Invalid\",\"message\":\"m\","
                                "\"details\":{\"causes\":[{\"field\":\"spec.x\"}]}}");
        struct kube_error e = { 0 };

        (void)state;
        kube_error_set(&e, 422, st, "fallback");
        cJSON_Delete(st);
        assert_int_equal(e.http_status, 422);
        assert_string_equal(e.reason, "Invalid");
        assert_string_equal(e.message, "m");
        assert_int_equal(cJSON_GetArraySize(e.causes), 1);
        kube_error_set(&e, 0, NULL, "connection refused");
        assert_null(e.reason);
        assert_null(e.causes);
        assert_string_equal(e.message, "connection refused");
        kube_error_release(&e);
        assert_null(e.message);
}

static void test_helpers__meta_labels_annotations(void **state)
{
        cJSON *o = cJSON_Parse("{\"metadata\":{\"name\":\"n\",\"labels\":{\"a\":\"1\"},"
                               "\"annotations\":{\"b\":\"2\",\"c\":3}}}");

        (void)state;
        assert_string_equal(kube_meta_str(o, "name"), "n");
        assert_null(kube_meta_str(o, "namespace"));
        assert_string_equal(kube_label(o, "a"), "1");
        assert_null(kube_label(o, "b"));
        assert_string_equal(kube_annotation(o, "b"), "2");
        assert_null(kube_annotation(o, "c")); /* not a string */
        assert_null(kube_meta_str(NULL, "name"));
        cJSON_Delete(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_framer__lines_split_across_one_byte_chunks),
                cmocka_unit_test(test_framer__many_lines_in_one_chunk_and_a_tail_kept),
                cmocka_unit_test(test_framer__line_over_the_cap_is_too_big),
                cmocka_unit_test(test_framer__callback_result_stops_framing),
                cmocka_unit_test(test_decode__event_types_in_order),
                cmocka_unit_test(test_decode__error_410_is_gone_with_the_status_copied),
                cmocka_unit_test(test_decode__error_500_and_malformed_lines),
                cmocka_unit_test(test_decode__callback_stop_is_not_an_error),
                cmocka_unit_test(test_decode__framed_stream_end_to_end),
                cmocka_unit_test(test_status__codes_and_reasons_map_to_errors),
                cmocka_unit_test(test_status__causes_are_copied_and_reset),
                cmocka_unit_test(test_helpers__meta_labels_annotations),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
