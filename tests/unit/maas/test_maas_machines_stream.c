/*
 * Unit: maas_list_machines decodes the list as the body streams in (maas_client.c
 * run_machines over the transport's stream()), behind a fake transport that hands the body
 * over in chunks of a chosen size: every attempt signed afresh, a stream cut halfway retried
 * from nothing, Retry-After honoured before the streamed answer, a machine over the 1 MiB
 * cap refused without a retry, a malformed list named, an error body buffered, and the
 * buffered path when the transport cannot stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "maas_client.h"
#include "maas_decode.h"
#include "xalloc.h"

struct fake {
        struct http_transport t;
        char *body;    /* the 2xx list */
        size_t chunk;  /* bytes per on_chunk call; 0 = all at once */
        unsigned cut;  /* the first this many streams end halfway with a transport error */
        unsigned slow; /* the first this many answers are 429 with Retry-After: 2 */
        long status;   /* > 0: every answer has this status (body "No such thing") */
        unsigned sends, streams;
        char last_auth[512]; /* the previous attempt's Authorization header */
        unsigned fresh_auth; /* attempts whose Authorization differed from the previous */
        uint64_t slept[8];
        size_t n_slept;
};

static void answer(struct transport_response *resp, long status, const char *body, long retry)
{
        resp->status = status;
        resp->body = xstrdup(body);
        resp->body_len = strlen(body);
        resp->content_type = xstrdup("application/json");
        resp->retry_after_s = retry;
}

static void note_auth(struct fake *f, const struct transport_request *req)
{
        assert_true(req->n_headers >= 1);
        assert_memory_equal(req->headers[0], "Authorization: OAuth ", 21);
        if (strcmp(req->headers[0], f->last_auth) != 0)
                f->fresh_auth++;
        (void)snprintf(f->last_auth, sizeof(f->last_auth), "%s", req->headers[0]);
        assert_non_null(strstr(req->url, "/machines/"));
}

/* The status-only answers; true when one was given. */
static bool refuse(struct fake *f, struct transport_response *resp)
{
        if (f->slow) {
                f->slow--;
                answer(resp, 429, "slow down", 2);
                return true;
        }
        if (f->status) {
                answer(resp, f->status, "No such thing", -1);
                return true;
        }
        return false;
}

static int fake_send(struct http_transport *t,
                     const struct transport_request *req,
                     struct transport_response *resp)
{
        struct fake *f = (struct fake *)t;

        f->sends++;
        note_auth(f, req);
        if (!refuse(f, resp))
                answer(resp, 200, f->body, -1);
        return 0;
}

static int fake_stream(struct http_transport *t,
                       const struct transport_request *req,
                       const struct transport_stream *s,
                       struct transport_response *resp)
{
        struct fake *f = (struct fake *)t;
        size_t len = strlen(f->body), end = len, step;

        f->streams++;
        note_auth(f, req);
        if (refuse(f, resp))
                return 0;
        if (f->cut) {
                f->cut--;
                end = len / 2;
        }
        step = f->chunk ? f->chunk : len;
        for (size_t at = 0; at < end; at += step) {
                size_t n = end - at < step ? end - at : step;

                if (s->on_chunk(s->arg, f->body + at, n) != 0)
                        break; /* the client ended the transfer: still a response */
        }
        if (end < len) {
                (void)snprintf(t->error, sizeof(t->error), "Connection reset by peer");
                return CM_ETRANSPORT;
        }
        answer(resp, 200, "", -1);
        return 0;
}

static void fake_destroy(struct http_transport *t)
{
        (void)t;
}

static void record_sleep(void *ud, uint64_t ms)
{
        struct fake *f = ud;

        if (f->n_slept < 8)
                f->slept[f->n_slept++] = ms;
}

/* A list of n machines m0000.. with a hostname, a zone, tags and strings holding what a
 * splitter must not take for structure. */
static char *machines_json(size_t n)
{
        struct buf b;

        buf_init(&b, 64u << 20);
        assert_int_equal(buf_append_str(&b, "[\n"), 0);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(
                        buf_printf(&b,
                                   "%s {\"system_id\": \"m%04zx\", \"hostname\": \"n-%zu\", "
                                   "\"description\": \"a [rack] {2}, \\\"quoted\\\" \\\\\", "
                                   "\"cpu_count\": 4, \"memory\": 8192, \"status\": 4, "
                                   "\"zone\": {\"name\": \"az1\"}, \"pool\": {\"name\": \"capi\"}, "
                                   "\"tag_names\": [\"ssd\", \"x]\"]}\n",
                                   i ? "," : "", i, i),
                        0);
        assert_int_equal(buf_append_str(&b, "]\n"), 0);
        return buf_take(&b, NULL);
}

struct fx {
        struct fake fake;
        struct maas_config cfg;
        struct maas_client *mc;
};

static int fx_setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));
        char *err = NULL;

        f->fake.t = (struct http_transport){ .send = fake_send,
                                             .stream = fake_stream,
                                             .destroy = fake_destroy };
        f->fake.body = machines_json(300);
        assert_int_equal(
                maas_config_parse("http://maas.invalid:5240/MAAS", "ck:tk:ts", &f->cfg, &err), 0);
        assert_int_equal(maas_client_new(&(struct maas_client_opts){ .cfg = &f->cfg,
                                                                     .transport = &f->fake.t,
                                                                     .sleep_ms = record_sleep,
                                                                     .sleep_ud = &f->fake },
                                         &f->mc),
                         0);
        *state = f;
        return 0;
}

static int fx_teardown(void **state)
{
        struct fx *f = *state;

        maas_client_free(f->mc);
        maas_config_release(&f->cfg);
        free(f->fake.body);
        free(f);
        return 0;
}

static int list(struct fx *f, struct maas_node_list *l, struct maas_error *err)
{
        return maas_list_machines(f->mc, &(struct maas_node_filter){ .zone = "az1" }, l, err);
}

/* The list holds m0000..m(n-1), in order, once each. */
static void assert_machines(const struct maas_node_list *l, size_t n)
{
        char id[24];

        assert_int_equal(l->n, n);
        for (size_t i = 0; i < n; i++) {
                (void)snprintf(id, sizeof(id), "m%04zx", i);
                assert_string_equal(l->items[i].system_id, id);
                assert_string_equal(l->items[i].zone, "az1");
                assert_int_equal(l->items[i].tags.n, 2);
        }
}

static void test_maas_machines_stream__decoded_one_byte_at_a_time(void **state)
{
        struct fx *f = *state;
        struct maas_node_list l = { 0 };
        struct maas_error err = { 0 };

        f->fake.chunk = 1;
        assert_int_equal(list(f, &l, &err), 0);
        assert_int_equal(f->fake.streams, 1);
        assert_int_equal(f->fake.sends, 0);
        assert_int_equal(err.attempts, 1);
        assert_machines(&l, 300);
        maas_node_list_release(&l);
        maas_error_release(&err);
}

static void test_maas_machines_stream__a_cut_stream_is_retried_from_nothing(void **state)
{
        struct fx *f = *state;
        struct maas_node_list l = { 0 };
        struct maas_error err = { 0 };

        f->fake.chunk = 100;
        f->fake.cut = 2;
        assert_int_equal(list(f, &l, &err), 0);
        assert_int_equal(f->fake.streams, 3);
        assert_int_equal(f->fake.fresh_auth, 3); /* a new nonce each attempt */
        assert_int_equal(err.attempts, 3);
        assert_int_equal(f->fake.n_slept, 2); /* backoff between attempts */
        assert_machines(&l, 300);             /* not 450 or 600 */
        maas_node_list_release(&l);

        /* out of attempts: the transport's error, nothing half decoded leaks out */
        f->fake.cut = 4;
        assert_int_equal(list(f, &l, &err), CM_ETRANSPORT);
        assert_int_equal(err.attempts, 4);
        assert_string_equal(err.message, "Connection reset by peer");
        assert_null(l.items);
        maas_error_release(&err);
}

static void test_maas_machines_stream__retry_after_before_the_stream(void **state)
{
        struct fx *f = *state;
        struct maas_node_list l = { 0 };
        struct maas_error err = { 0 };

        f->fake.slow = 1;
        f->fake.chunk = 4096;
        assert_int_equal(list(f, &l, &err), 0);
        assert_int_equal(f->fake.n_slept, 1);
        assert_int_equal(f->fake.slept[0], 2000);
        assert_machines(&l, 300);
        maas_node_list_release(&l);
        maas_error_release(&err);
}

static void test_maas_machines_stream__a_machine_over_the_cap_is_refused(void **state)
{
        struct fx *f = *state;
        struct maas_node_list l = { 0 };
        struct maas_error err = { 0 };
        size_t big = MAAS_MACHINE_JSON_MAX;
        char *pad = xmalloc(big + 1);

        memset(pad, 'x', big);
        pad[big] = '\0';
        free(f->fake.body);
        f->fake.body = xasprintf("[{\"system_id\":\"a\"},{\"system_id\":\"b\"},"
                                 "{\"system_id\":\"c\",\"description\":\"%s\"},"
                                 "{\"system_id\":\"d\"}]",
                                 pad);
        free(pad);
        f->fake.chunk = 65536;
        assert_int_equal(list(f, &l, &err), CM_ETOOBIG);
        assert_int_equal(f->fake.streams, 1); /* not retried */
        assert_int_equal(err.cls, MAAS_ERR_PROTOCOL);
        assert_non_null(strstr(err.message, "MAAS's machine list: machine 2 of the array"));
        assert_non_null(strstr(err.message, "over 1048576 bytes of JSON, the limit"));
        assert_null(l.items);
        maas_error_release(&err);
}

static void test_maas_machines_stream__a_malformed_list_is_named(void **state)
{
        static const struct {
                const char *body, *why;
        } rows[] = {
                { "[{\"system_id\":\"a\"},{\"system_id\":\"b\"", "ended inside the array" },
                { "{\"system_id\":\"a\"}", "not a JSON array" },
                { "[{\"system_id\":\"a\"}] x", "bytes after the array" },
                { "[{\"system_id\":\"a\"},{\"hostname\":\"b\"}]", "machine 1 of the list is not "
                                                                  "a machine" },
                { "[{\"system_id\":\"a\"},{\"system_id\":}]", "machine 1 of the list is not "
                                                              "valid JSON" },
        };
        struct fx *f = *state;

        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                struct maas_node_list l = { 0 };
                struct maas_error err = { 0 };

                free(f->fake.body);
                f->fake.body = xstrdup(rows[i].body);
                f->fake.chunk = 3;
                f->fake.streams = 0;
                assert_int_equal(list(f, &l, &err), CM_EPARSE);
                assert_int_equal(f->fake.streams, 1);
                if (!strstr(err.message, rows[i].why))
                        fail_msg("%s: %s", rows[i].body, err.message);
                assert_null(l.items);
                maas_error_release(&err);
        }
}

static void test_maas_machines_stream__an_error_body_is_buffered(void **state)
{
        struct fx *f = *state;
        struct maas_node_list l = { 0 };
        struct maas_error err = { 0 };

        f->fake.status = 404;
        assert_int_equal(list(f, &l, &err), CM_ENOTFOUND);
        assert_int_equal(err.http_status, 404);
        assert_string_equal(err.message, "No such thing");
        maas_error_release(&err);
}

static void test_maas_machines_stream__buffered_without_stream(void **state)
{
        struct fx *f = *state;
        struct maas_node_list l = { 0 };
        struct maas_error err = { 0 };

        f->fake.t.stream = NULL;
        f->fake.slow = 1;
        assert_int_equal(list(f, &l, &err), 0);
        assert_int_equal(f->fake.sends, 2);
        assert_int_equal(f->fake.streams, 0);
        assert_machines(&l, 300);
        maas_node_list_release(&l);
        maas_error_release(&err);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
        const struct CMUnitTest tests[] = {
                T(test_maas_machines_stream__decoded_one_byte_at_a_time),
                T(test_maas_machines_stream__a_cut_stream_is_retried_from_nothing),
                T(test_maas_machines_stream__retry_after_before_the_stream),
                T(test_maas_machines_stream__a_machine_over_the_cap_is_refused),
                T(test_maas_machines_stream__a_malformed_list_is_named),
                T(test_maas_machines_stream__an_error_body_is_buffered),
                T(test_maas_machines_stream__buffered_without_stream),
        };
#undef T

        return cmocka_run_group_tests_name("maas_machines_stream", tests, NULL, NULL);
}
