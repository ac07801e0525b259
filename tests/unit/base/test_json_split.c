/*
 * Unit: json_split, the streaming splitter of a top-level JSON array. Every body is fed in
 * every way it can be cut (whole, one byte at a time, two and three chunks at every pair of
 * boundaries) and must give the same elements and the same outcome each time, the same as
 * json_array_each over the whole text.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "json.h"
#include "json_split.h"

/* The elements handed over, joined with '|'. */
struct elems {
        char out[1024];
        size_t len;
        int calls;
        int stop_at; /* return 9 on this call (1-based); 0 = never */
};

static int collect(void *arg, const char *elem, size_t len)
{
        struct elems *e = arg;

        e->calls++;
        if (e->len + len + 2 >= sizeof(e->out)) /* only counted (the 1 MiB element) */
                return e->calls == e->stop_at ? 9 : 0;
        if (e->calls > 1)
                e->out[e->len++] = '|';
        memcpy(e->out + e->len, elem, len);
        e->len += len;
        e->out[e->len] = '\0';
        return e->calls == e->stop_at ? 9 : 0;
}

struct outcome {
        int r;
        struct elems e;
        char message[160];
};

/* Feeds text cut at the boundaries cuts[0..n) (ascending), then finishes. */
static struct outcome run_cut(const char *text,
                              const size_t *cuts,
                              size_t n_cuts,
                              const struct json_split_opts *base)
{
        struct outcome o = { 0 };
        struct json_split_opts opts = base ? *base : (struct json_split_opts){ 0 };
        struct json_split s;
        size_t len = strlen(text), from = 0;

        opts.fn = collect;
        opts.arg = &o.e;
        json_split_init(&s, &opts);
        for (size_t i = 0; i <= n_cuts && o.r == 0; i++) {
                size_t to = i < n_cuts ? cuts[i] : len;

                o.r = json_split_feed(&s, text + from, to - from);
                from = to;
        }
        if (o.r == 0)
                o.r = json_split_finish(&s);
        else
                assert_int_equal(json_split_finish(&s), o.r); /* sticky */
        memcpy(o.message, s.message, sizeof(o.message));
        json_split_release(&s);
        return o;
}

static struct outcome run_bytes(const char *text, const struct json_split_opts *opts)
{
        struct outcome o = { 0 };
        struct json_split_opts op = opts ? *opts : (struct json_split_opts){ 0 };
        struct json_split s;

        op.fn = collect;
        op.arg = &o.e;
        json_split_init(&s, &op);
        for (size_t i = 0; text[i] && o.r == 0; i++)
                o.r = json_split_feed(&s, text + i, 1);
        if (o.r == 0)
                o.r = json_split_finish(&s);
        memcpy(o.message, s.message, sizeof(o.message));
        json_split_release(&s);
        return o;
}

static void same(const struct outcome *a, const struct outcome *b, const char *text)
{
        if (a->r != b->r || strcmp(a->e.out, b->e.out) != 0 || a->e.calls != b->e.calls)
                fail_msg("%s: %d [%s] vs %d [%s]", text, a->r, a->e.out, b->r, b->e.out);
}

/* Every way of cutting text (up to three chunks, and one byte at a time) gives what the
 * whole text gives, and what json_array_each says; returns that outcome. */
static struct outcome every_cut(const char *text, const struct json_split_opts *opts)
{
        struct outcome whole = run_cut(text, NULL, 0, opts), o;
        struct elems ref = { 0 };
        size_t len = strlen(text);
        int rr = json_array_each(text, len, collect, &ref);

        if (!opts || (!opts->max_elem && !opts->max_elems)) {
                assert_int_equal(whole.r, rr);
                assert_string_equal(whole.e.out, ref.out);
        }
        o = run_bytes(text, opts);
        same(&whole, &o, text);
        for (size_t i = 0; i <= len; i++)
                for (size_t j = i; j <= len; j++) {
                        o = run_cut(text, (size_t[]){ i, j }, 2, opts);
                        same(&whole, &o, text);
                }
        return whole;
}

static void test_json_split__elements_across_every_chunk_boundary(void **state)
{
        static const char list[] =
                " [ {\"a\":[1,2,{\"b\":\"],}{[\"}]} , \"x\\\"],\" ,3.5e1,"
                "null\n,[],\t{} ,\"back\\\\\",\"\\\\\\\"\",[[[\"]]]\"]]],{\"k\\\"\":\"}\"}, true "
                "]\r\n";
        struct outcome o;

        (void)state;
        o = every_cut(list, NULL);
        assert_int_equal(o.r, 0);
        assert_string_equal(o.e.out, "{\"a\":[1,2,{\"b\":\"],}{[\"}]}|\"x\\\"],\"|3.5e1|null|[]|{}"
                                     "|\"back\\\\\"|\"\\\\\\\"\"|[[[\"]]]\"]]]|{\"k\\\"\":\"}\"}"
                                     "|true");
        assert_int_equal(o.e.calls, 11);
}

static void test_json_split__whitespace_inside_and_around(void **state)
{
        struct outcome o;

        (void)state;
        o = every_cut("\t\r\n [ \n\t{ \"a\" :\t[ 1 , 2 ] }\r\n ,\n\"s p\"\t]\n\t ", NULL);
        assert_int_equal(o.r, 0);
        assert_string_equal(o.e.out, "{ \"a\" :\t[ 1 , 2 ] }|\"s p\"");
        o = every_cut("[]", NULL);
        assert_int_equal(o.r, 0);
        assert_int_equal(o.e.calls, 0);
        o = every_cut(" [ \n ] ", NULL);
        assert_int_equal(o.r, 0);
        assert_int_equal(o.e.calls, 0);
}

static void test_json_split__element_over_the_cap(void **state)
{
        struct json_split_opts cap = { .max_elem = 16, .what = "machine" };
        struct outcome o;

        (void)state;
        /* 16 bytes is allowed, whitespace inside counted; 17 is not */
        o = every_cut("[\"0123456789abcd\" , {\"a\": \"1234567\"}]", &cap);
        assert_int_equal(o.r, 0);
        assert_string_equal(o.e.out, "\"0123456789abcd\"|{\"a\": \"1234567\"}");
        o = every_cut("[1,\"0123456789abcde\",2]", &cap);
        assert_int_equal(o.r, CM_ETOOBIG);
        assert_string_equal(o.e.out, "1"); /* what came before is handed over */
        assert_non_null(strstr(o.message, "machine 1 of the array"));
        assert_non_null(strstr(o.message, "over 16 bytes of JSON, the limit"));
        /* the default cap is 1 MiB */
        {
                size_t big = JSON_SPLIT_ELEM_MAX + 1;
                char *text = malloc(big + 3);
                struct outcome w;

                assert_non_null(text);
                text[0] = '[';
                text[1] = '"';
                memset(text + 2, 'x', big - 2);
                text[big] = '"';
                text[big + 1] = ']';
                text[big + 2] = '\0';
                w = run_cut(text, NULL, 0, NULL);
                assert_int_equal(w.r, CM_ETOOBIG);
                assert_non_null(strstr(w.message, "over 1048576 bytes"));
                text[big - 1] = '"'; /* now exactly 1 MiB */
                text[big] = ']';
                text[big + 1] = '\0';
                w = run_cut(text, NULL, 0, NULL);
                assert_int_equal(w.r, 0);
                assert_int_equal(w.e.calls, 1);
                free(text);
        }
}

static void test_json_split__count_is_bounded(void **state)
{
        struct json_split_opts two = { .max_elems = 2, .what = "machine" };
        struct outcome o;

        (void)state;
        o = every_cut("[1,2]", &two);
        assert_int_equal(o.r, 0);
        o = every_cut("[1,2,3]", &two);
        assert_int_equal(o.r, CM_ETOOBIG);
        assert_string_equal(o.e.out, "1|2");
        assert_non_null(strstr(o.message, "more than 2 machines in the array"));
}

static void test_json_split__truncated_bodies_fail_at_the_end(void **state)
{
        static const char body[] = "[{\"a\":\"b\\\"c\"},[1,[2]],\"x\\\\\",3]";
        char prefix[sizeof(body)];

        (void)state;
        for (size_t n = 0; n < sizeof(body) - 1; n++) {
                struct outcome o;

                memcpy(prefix, body, n);
                prefix[n] = '\0';
                o = every_cut(prefix, NULL);
                if (o.r != CM_EPARSE)
                        fail_msg("accepted the prefix %s", prefix);
        }
        assert_int_equal(every_cut(body, NULL).r, 0);
}

static void test_json_split__not_one_array_is_refused(void **state)
{
        static const char *const bad[] = {
                "",           "  ",      "{}",      "1",       "[",    "[1",    "[1,",   "[1,]",
                "[,1]",       "[1]x",    "[1] [2]", "[\"abc]", "[}]",  "[1}",   "[\"\\", "[[1]",
                "[{\"a\":1]", "\"[1]\"", "[1,,2]",  "]",       "[1]]", "[1] ,", "null",  "x[1]",
        };

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct outcome o = every_cut(bad[i], NULL);

                if (o.r != CM_EPARSE)
                        fail_msg("accepted %s", bad[i]);
                assert_true(o.message[0] != '\0');
        }
        assert_non_null(
                strstr(run_cut("{\"a\":1}", NULL, 0, NULL).message, "not a JSON array (offset 0)"));
        assert_non_null(strstr(run_cut("[1] x", NULL, 0, NULL).message,
                               "bytes after the array (offset 4)"));
        assert_non_null(strstr(run_cut("[1,2", NULL, 0, NULL).message, "ended inside the array"));
}

static void test_json_split__callback_stops_and_errors_stick(void **state)
{
        struct outcome o = { .e.stop_at = 2 };
        struct json_split s;

        (void)state;
        json_split_init(&s, &(struct json_split_opts){ .fn = collect, .arg = &o.e });
        assert_int_equal(json_split_feed(&s, "[1,2,3]", 7), 9);
        assert_int_equal(json_split_feed(&s, "", 0), 9);
        assert_int_equal(json_split_finish(&s), 9);
        assert_string_equal(o.e.out, "1|2");
        /* a reset starts over with nothing read */
        json_split_reset(&s);
        o.e = (struct elems){ 0 };
        assert_int_equal(json_split_feed(&s, " [\"a\", ", 7), 0);
        assert_false(json_split_done(&s));
        assert_int_equal(json_split_feed(&s, "\"b\"]", 4), 0);
        assert_true(json_split_done(&s));
        assert_int_equal(json_split_finish(&s), 0);
        assert_string_equal(o.e.out, "\"a\"|\"b\"");
        assert_int_equal(s.n_elems, 2);
        json_split_release(&s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_json_split__elements_across_every_chunk_boundary),
                cmocka_unit_test(test_json_split__whitespace_inside_and_around),
                cmocka_unit_test(test_json_split__element_over_the_cap),
                cmocka_unit_test(test_json_split__count_is_bounded),
                cmocka_unit_test(test_json_split__truncated_bodies_fail_at_the_end),
                cmocka_unit_test(test_json_split__not_one_array_is_refused),
                cmocka_unit_test(test_json_split__callback_stops_and_errors_stick),
        };

        return cmocka_run_group_tests_name("json_split", tests, NULL, NULL);
}
