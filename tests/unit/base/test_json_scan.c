/*
 * Unit tests for json_scan.h: every strictness case (duplicate keys at any depth, \u0000,
 * each class of invalid UTF-8, lone surrogates, grammar), the budgets (values, string bytes,
 * depth, open members) and the valid edge cases (escaped surrogate pairs, big numbers, keys
 * equal only once decoded), and that whatever the scanner accepts cJSON parses; the keys it
 * reports with their lengths and escapes, and the trees it builds from accepted text being
 * node for node cJSON's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../support/cjson_same.h"
#include "err.h"
#include "json.h"
#include "json_scan.h"
#include "testutil.h"
#include "xalloc.h"

struct scase {
        const char *name;
        const char *text;
        size_t len; /* 0 = strlen(text) */
        int rc;
        const char *message; /* exact, or NULL when rc is 0 */
};

static const struct scase cases[] = {
        /* valid */
        { "object", "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"}}", 0, CM_OK, NULL },
        { "scalar", " 12 ", 0, CM_OK, NULL },
        { "empty containers", "{\"a\":{},\"b\":[]}", 0, CM_OK, NULL },
        { "escaped surrogate pair", "[\"\\ud83d\\ude00\"]", 0, CM_OK, NULL },
        { "raw 4-byte UTF-8", "[\"\xf0\x9f\x98\x80\"]", 0, CM_OK, NULL },
        { "highest code point", "[\"\xf4\x8f\xbf\xbf\"]", 0, CM_OK, NULL },
        { "U+FFFF", "[\"\xef\xbf\xbf\\uffff\"]", 0, CM_OK, NULL },
        { "escapes", "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\"]", 0, CM_OK, NULL },
        { "big numbers", "[1e308,1e400,-1.5E-400,123456789012345678901234567890,-0,0.0e+0]", 0,
          CM_OK, NULL },
        { "63-character number",
          "[123456789012345678901234567890123456789012345678901234567890123]", 0, CM_OK, NULL },
        { "same key in sibling objects", "[{\"a\":1},{\"a\":2}]", 0, CM_OK, NULL },
        { "same key at two depths", "{\"a\":{\"a\":{\"a\":1}},\"b\":{\"a\":2}}", 0, CM_OK, NULL },
        { "keys differing by case", "{\"a\":1,\"A\":2}", 0, CM_OK, NULL },
        /* duplicates */
        { "duplicate at the top", "{\"a\":1,\"b\":2,\"a\":3}", 0, CM_EPARSE,
          "a: duplicate key (offset 13)" },
        { "duplicate operation",
          "{\"request\":{\"operation\":\"DELETE\",\"operation\":\"CREATE\"}}", 0, CM_EPARSE,
          "request.operation: duplicate key (offset 33)" },
        { "duplicate deep in an array", "{\"o\":{\"l\":[{\"x\":1},{\"x\":1,\"y\":2,\"x\":3}]}}", 0,
          CM_EPARSE, "o.l[1].x: duplicate key (offset 32)" },
        { "duplicate once decoded", "{\"ab\":1,\"a\\u0062\":2}", 0, CM_EPARSE,
          "ab: duplicate key (offset 8)" },
        { "duplicate after a nested object", "{\"a\":{\"b\":1},\"c\":2,\"a\":3}", 0, CM_EPARSE,
          "a: duplicate key (offset 19)" },
        { "duplicate key with a dot", "{\"l\":{\"x.io/y\":1,\"x.io/y\":2}}", 0, CM_EPARSE,
          "l[x.io/y]: duplicate key (offset 17)" },
        /* NUL and control characters */
        { "\\u0000 in a value", "{\"uid\":\"ab\\u0000cd\"}", 0, CM_EPARSE,
          "uid: string holds \\u0000 (offset 10)" },
        { "\\u0000 in a key", "{\"m\":{\"a\\u0000\":1}}", 0, CM_EPARSE,
          "m: key holds \\u0000 (offset 8)" },
        { "raw NUL", "[\"a\0b\"]", 7, CM_EPARSE,
          "[0]: string holds control character 0x00 (offset 3)" },
        { "raw newline", "[\"a\nb\"]", 0, CM_EPARSE,
          "[0]: string holds control character 0x0a (offset 3)" },
        /* invalid UTF-8, each class */
        { "stray continuation byte", "{\"n\":\"a\x80\"}", 0, CM_EPARSE,
          "n: string holds invalid UTF-8 (byte 0x80) (offset 7)" },
        { "truncated sequence", "{\"n\":\"\xe2\x82\"}", 0, CM_EPARSE,
          "n: string holds invalid UTF-8 (byte 0xe2) (offset 6)" },
        { "sequence cut by the end", "[\"\xe2", 0, CM_EPARSE,
          "[0]: string holds invalid UTF-8 (byte 0xe2) (offset 2)" },
        { "overlong 2-byte", "{\"n\":\"\xc0\xaf\"}", 0, CM_EPARSE,
          "n: string holds invalid UTF-8 (byte 0xc0) (offset 6)" },
        { "overlong 3-byte", "{\"n\":\"\xe0\x80\xaf\"}", 0, CM_EPARSE,
          "n: string holds invalid UTF-8 (byte 0xe0) (offset 6)" },
        { "overlong 4-byte", "{\"n\":\"\xf0\x80\x80\xaf\"}", 0, CM_EPARSE,
          "n: string holds invalid UTF-8 (byte 0xf0) (offset 6)" },
        { "raw surrogate", "{\"n\":\"\xed\xa0\x80\"}", 0, CM_EPARSE,
          "n: string holds invalid UTF-8 (byte 0xed) (offset 6)" },
        { "past U+10FFFF", "{\"n\":\"\xf4\x90\x80\x80\"}", 0, CM_EPARSE,
          "n: string holds invalid UTF-8 (byte 0xf4) (offset 6)" },
        { "0xff", "{\"n\":\"\xff\"}", 0, CM_EPARSE,
          "n: string holds invalid UTF-8 (byte 0xff) (offset 6)" },
        { "invalid UTF-8 in a key", "{\"a\":{\"\xc3\":1}}", 0, CM_EPARSE,
          "a: key holds invalid UTF-8 (byte 0xc3) (offset 7)" },
        { "lone high surrogate", "{\"n\":\"\\ud800\"}", 0, CM_EPARSE,
          "n: string holds a lone UTF-16 surrogate \\ud800 (offset 6)" },
        { "high surrogate then a letter", "{\"n\":\"\\ud800x\"}", 0, CM_EPARSE,
          "n: string holds a lone UTF-16 surrogate \\ud800 (offset 6)" },
        { "two high surrogates", "{\"n\":\"\\ud800\\ud800\"}", 0, CM_EPARSE,
          "n: string holds a lone UTF-16 surrogate \\ud800 (offset 6)" },
        { "lone low surrogate", "{\"n\":\"\\udc00\"}", 0, CM_EPARSE,
          "n: string holds a lone UTF-16 surrogate \\udc00 (offset 6)" },
        { "non-ASCII outside strings", "{\"n\":\xc3\xa9}", 0, CM_EPARSE,
          "n: unexpected byte 0xc3 (offset 5)" },
        /* grammar Go rejects and cJSON lets through */
        { "leading zero", "[01]", 0, CM_EPARSE, "[0]: number with a leading zero (offset 2)" },
        { "64-character number",
          "[1234567890123456789012345678901234567890123456789012345678901234]", 0, CM_EPARSE,
          "[0]: number of 64 characters; the limit is 63 (offset 1)" },
        { "BOM", "\xef\xbb\xbf{}", 0, CM_EPARSE, "unexpected byte 0xef at offset 0" },
        { "vertical tab as space", "[1,\v2]", 0, CM_EPARSE,
          "[1]: unexpected byte 0x0b (offset 3)" },
        { "trailing comma", "[1,]", 0, CM_EPARSE, "[1]: unexpected ']' (offset 3)" },
        { "trailing bytes", "{} x", 0, CM_EPARSE,
          "trailing bytes after the JSON value at offset 3" },
        { "two documents", "{}{}", 0, CM_EPARSE,
          "trailing bytes after the JSON value at offset 2" },
        { "unquoted key", "{a:1}", 0, CM_EPARSE, "expected a key at offset 1" },
        { "missing colon", "{\"a\" 1}", 0, CM_EPARSE, "a: expected ':' after the key (offset 5)" },
        { "unclosed object", "{\"a\":1", 0, CM_EPARSE, "a: object does not end (offset 6)" },
        { "unclosed string", "[\"abc", 0, CM_EPARSE, "[0]: string does not end (offset 5)" },
        { "bad escape", "[\"\\x\"]", 0, CM_EPARSE, "[0]: string: invalid escape (offset 2)" },
        { "short \\u", "[\"\\u12\"]", 0, CM_EPARSE,
          "[0]: string: \\u needs four hex digits (offset 2)" },
        { "mismatched bracket", "{\"a\":[1}", 0, CM_EPARSE,
          "a[0]: expected ',' or ']' (offset 7)" },
        { "bad literal", "[nul]", 0, CM_EPARSE, "[0]: expected a JSON value (offset 1)" },
        { "empty", "", 0, CM_EPARSE, "expected a JSON value, got the end at offset 0" },
        { "only whitespace", " \n", 0, CM_EPARSE,
          "expected a JSON value, got the end at offset 2" },
        { "minus alone", "[-]", 0, CM_EPARSE, "[0]: number without digits (offset 2)" },
        { "dot without digits", "[1.]", 0, CM_EPARSE,
          "[0]: number without digits after '.' (offset 3)" },
        { "exponent without digits", "[1e+]", 0, CM_EPARSE,
          "[0]: number without digits in the exponent (offset 4)" },
};

static void test_json_scan__cases(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const struct scase *c = &cases[i];
                size_t len = c->len ? c->len : strlen(c->text);
                struct json_scan_result res;
                int rc = json_scan(c->text, len, NULL, &res);
                cJSON *tree = NULL;

                if (rc != c->rc || (c->message && strcmp(res.message, c->message) != 0))
                        fail_msg("%s: rc %d \"%s\", want %d \"%s\"", c->name, rc, res.message,
                                 c->rc, c->message ? c->message : "");
                if (rc == 0) {
                        /* what the scanner accepts, cJSON parses */
                        if (json_parse(c->text, len, &tree) != 0)
                                fail_msg("%s: accepted by json_scan, refused by cJSON", c->name);
                        cJSON_Delete(tree);
                }
        }
}

/* The fault classes callers word their answers by. */
static void test_json_scan__faults(void **state)
{
        static const struct {
                const char *text;
                enum json_scan_fault fault;
        } f[] = {
                { "{\"a\":1}", JSON_SCAN_NONE },
                { "{\"a\":1,\"a\":2}", JSON_SCAN_DUPLICATE },
                { "[\"\\u0000\"]", JSON_SCAN_NUL },
                { "[\"\x01\"]", JSON_SCAN_CONTROL },
                { "[\"\xc0\xaf\"]", JSON_SCAN_UTF8 },
                { "[\"\\udfff\"]", JSON_SCAN_UTF8 },
                { "[01]", JSON_SCAN_SYNTAX },
                { "[", JSON_SCAN_SYNTAX },
                { "[1234567890123456789012345678901234567890123456789012345678901234]",
                  JSON_SCAN_NUMBER },
        };
        struct json_scan_result res;

        (void)state;
        for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
                if (json_scan(f[i].text, strlen(f[i].text), NULL, &res) != 0 && !res.message[0])
                        fail_msg("%s: no message", f[i].text);
                if (res.fault != f[i].fault)
                        fail_msg("%s: fault %d, want %d", f[i].text, res.fault, f[i].fault);
        }
}

static void test_json_scan__counts(void **state)
{
        static const char text[] =
                "{\"a\":[1,\"xy\",{\"b\":null}],\"c\\u00e9\":\"\\ud83d\\ude00\"}";
        struct json_scan_result res;

        (void)state;
        assert_int_equal(json_scan(text, strlen(text), NULL, &res), CM_OK);
        /* {} [] 1 "xy" {} null "😀" */
        assert_int_equal(res.stats.values, 7);
        assert_int_equal(res.stats.members, 3);
        /* keys a, b, cé and the strings xy, 😀 */
        assert_int_equal(res.stats.strings, 5);
        assert_int_equal(res.stats.string_bytes, 1 + 2 + 1 + 3 + 4);
        assert_int_equal(res.stats.depth, 3);
        assert_string_equal(res.message, "");
        assert_true(json_scan_tree_bytes(&res.stats) >= 7 * 64 + 11);
}

static char *array_of_zeros(size_t n, size_t *ret_len)
{
        char *s = xmalloc(2 * n + 2);
        size_t len = 0;

        s[len++] = '[';
        for (size_t i = 0; i < n; i++) {
                s[len++] = '0';
                s[len++] = i + 1 < n ? ',' : ']';
        }
        *ret_len = len;
        return s;
}

static void test_json_scan__value_budget_names_the_figure(void **state)
{
        struct json_scan_limits lim = { .max_values = 1000 };
        struct json_scan_result res;
        size_t len;
        char *bomb = array_of_zeros(100000, &len);

        (void)state;
        assert_int_equal(json_scan(bomb, len, &lim, &res), CM_ETOOBIG);
        assert_string_equal(res.message, "100001 JSON values; the limit is 1000");
        lim.max_values = 100001;
        assert_int_equal(json_scan(bomb, len, &lim, &res), CM_OK);
        free(bomb);
}

static void test_json_scan__string_budget(void **state)
{
        struct json_scan_limits lim = { .max_string_bytes = 10 };
        struct json_scan_result res;

        (void)state;
        assert_int_equal(json_scan("{\"abc\":\"defghij\"}", 17, &lim, &res), CM_OK);
        assert_int_equal(json_scan("{\"abc\":\"defghijk\"}", 18, &lim, &res), CM_ETOOBIG);
        assert_string_equal(res.message, "11 bytes of JSON strings; the limit is 10");
        /* decoded bytes: six characters of escapes count as the one byte they make */
        assert_int_equal(json_scan("[\"\\u0041\\u0041\\u0041\\u0041\\u0041\"]", 34, &lim, &res),
                         CM_OK);
        assert_int_equal(res.stats.string_bytes, 5);
}

static void test_json_scan__depth_budget_names_the_place(void **state)
{
        struct json_scan_limits lim = { .max_depth = 3 };
        struct json_scan_result res;
        char deep[2 * JSON_SCAN_DEPTH_MAX + 8];
        size_t n = 0;

        (void)state;
        assert_int_equal(json_scan("{\"a\":[{}]}", 10, &lim, &res), CM_OK);
        assert_int_equal(res.stats.depth, 3);
        assert_int_equal(json_scan("{\"a\":[{\"b\":[]}]}", 16, &lim, &res), CM_ETOOBIG);
        assert_string_equal(res.message, "JSON nested more than 3 levels deep at a[0].b; the limit "
                                         "is 3");
        assert_int_equal(res.fault, JSON_SCAN_LIMIT);
        /* without a limit, the scanner's own stack is the limit */
        for (size_t i = 0; i <= JSON_SCAN_DEPTH_MAX; i++)
                deep[n++] = '[';
        assert_int_equal(json_scan(deep, n, NULL, &res), CM_ETOOBIG);
        assert_non_null(strstr(res.message, "more than 128 levels deep at [0][0]"));
        assert_non_null(strstr(res.message, "; the limit is 128"));
}

/* An object of n members "k<i>":0, with the member dup (if any) repeated at the end. */
static char *object_of(size_t n, long dup, size_t *ret_len)
{
        size_t cap = n * 16 + 32, len = 0;
        char *s = xmalloc(cap);

        s[len++] = '{';
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(s + len, cap - len, "%s\"k%zu\":0", i ? "," : "", i);
        if (dup >= 0)
                len += (size_t)snprintf(s + len, cap - len, ",\"k%ld\":1", dup);
        s[len++] = '}';
        *ret_len = len;
        return s;
}

static void test_json_scan__duplicates_found_past_the_inline_table(void **state)
{
        struct json_scan_result res;
        size_t len;
        char *s;

        (void)state;
        /* past JSON_SCAN_KEYS_INLINE the table moves to the heap: still exact */
        s = object_of(5000, -1, &len);
        assert_int_equal(json_scan(s, len, NULL, &res), CM_OK);
        assert_int_equal(res.stats.members, 5000);
        free(s);
        s = object_of(5000, 7, &len);
        assert_int_equal(json_scan(s, len, NULL, &res), CM_EPARSE);
        assert_non_null(strstr(res.message, "k7: duplicate key"));
        free(s);
        s = object_of(5000, 4999, &len);
        assert_int_equal(json_scan(s, len, NULL, &res), CM_EPARSE);
        assert_non_null(strstr(res.message, "k4999: duplicate key"));
        free(s);
}

/* {"a0":0,...,"a<outer-1>":0,"big":<object of inner members>,"a<dup>":1}: the outer object
 * checked by filter (few members) or by hash (many), the inner one large enough to move the
 * table to the heap while the outer is open. */
static char *nested_of(size_t outer, size_t inner, long dup, size_t *ret_len)
{
        size_t in_len, cap = outer * 16 + inner * 16 + 64, len = 0;
        char *in = object_of(inner, -1, &in_len);
        char *s = xmalloc(cap);

        s[len++] = '{';
        for (size_t i = 0; i < outer; i++)
                len += (size_t)snprintf(s + len, cap - len, "\"a%zu\":0,", i);
        len += (size_t)snprintf(s + len, cap - len, "\"big\":%.*s", (int)in_len, in);
        if (dup >= 0)
                len += (size_t)snprintf(s + len, cap - len, ",\"a%ld\":1", dup);
        s[len++] = '}';
        free(in);
        *ret_len = len;
        return s;
}

/* Both ways of checking an object's keys (a filter for the first 16, a hash past them or
 * at an escape), across a table that grows while the outer object is open. */
static void test_json_scan__duplicates_by_filter_and_by_hash(void **state)
{
        static const struct {
                size_t outer, inner;
                long dup;
                int want;
        } rows[] = {
                { 3, 600, -1, CM_OK },     { 3, 600, 1, CM_EPARSE },  { 15, 600, 14, CM_EPARSE },
                { 16, 600, 0, CM_EPARSE }, { 40, 600, 3, CM_EPARSE }, { 40, 600, 39, CM_EPARSE },
                { 40, 600, -1, CM_OK },    { 40, 5, 20, CM_EPARSE },  { 2, 20, 1, CM_EPARSE },
        };
        struct json_scan_result res;
        size_t len;
        char *s;

        (void)state;
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                s = nested_of(rows[i].outer, rows[i].inner, rows[i].dup, &len);
                assert_int_equal(json_scan(s, len, NULL, &res), rows[i].want);
                if (rows[i].want != CM_OK)
                        assert_int_equal(res.fault, JSON_SCAN_DUPLICATE);
                free(s);
        }
        /* an escaped key after filtered ones: hashed from then on, decoded */
        assert_int_equal(json_scan("{\"ab\":1,\"c\":2,\"\\u0061b\":3}",
                                   strlen("{\"ab\":1,\"c\":2,\"\\u0061b\":3}"), NULL, &res),
                         CM_EPARSE);
        assert_int_equal(json_scan("{\"a\\u0062\":1,\"c\":2,\"ab\":3}",
                                   strlen("{\"a\\u0062\":1,\"c\":2,\"ab\":3}"), NULL, &res),
                         CM_EPARSE);
        assert_int_equal(json_scan("{\"ab\":1,\"ba\":2,\"aab\":3,\"abb\":4}",
                                   strlen("{\"ab\":1,\"ba\":2,\"aab\":3,\"abb\":4}"), NULL, &res),
                         CM_OK);
}

static void test_json_scan__open_members_are_capped(void **state)
{
        struct json_scan_result res;
        size_t len;
        char *s = object_of(JSON_SCAN_KEYS_MAX + 1, -1, &len);

        (void)state;
        assert_int_equal(json_scan(s, len, NULL, &res), CM_ETOOBIG);
        assert_non_null(strstr(res.message, "more than 65536 object members open at once at "
                                            "k65536; the limit is 65536"));
        free(s);
}

/* A path holding a long non-ASCII key is cut at a character boundary: the message stays
 * valid UTF-8 whatever the input. */
static void test_json_scan__messages_stay_valid_utf8(void **state)
{
        char text[1200];
        size_t n = 0;
        struct json_scan_result res;

        (void)state;
        n += (size_t)snprintf(text + n, sizeof(text) - n, "{\"");
        for (int i = 0; i < 300; i++)
                n += (size_t)snprintf(text + n, sizeof(text) - n, "\xc3\xa9");
        n += (size_t)snprintf(text + n, sizeof(text) - n, "\":\"\\u0000\"}");
        assert_int_equal(json_scan(text, n, NULL, &res), CM_EPARSE);
        assert_non_null(strstr(res.message, "string holds \\u0000"));
        for (size_t i = 0; res.message[i]; i++) {
                unsigned char c = (unsigned char)res.message[i];

                if (c >= 0x80) {
                        assert_true(c == 0xc3 && (unsigned char)res.message[i + 1] == 0xa9);
                        i++;
                }
        }
        /* a control character of a key is shown as '?' */
        assert_int_equal(json_scan("{\"a\\nb\":\"\\u0000\"}", 17, NULL, &res), CM_EPARSE);
        assert_string_equal(res.message, "[a?b]: string holds \\u0000 (offset 9)");
}

struct seen_members {
        const char *text;
        char log[512];
};

static void log_member(void *ud, const struct json_scan_member *m)
{
        struct seen_members *sm = ud;
        size_t n = strlen(sm->log);
        const char *key = sm->text + m->key_off + 1;

        (void)snprintf(sm->log + n, sizeof(sm->log) - n, "%u:%.*s%s=%.*s;", m->depth,
                       (int)(strchr(key, '"') - key), key,
                       m->parent_key_off == SIZE_MAX                        ? ""
                       : json_scan_key_is(sm->text, m->parent_key_off, "r") ? "(in r)"
                                                                            : "(in ?)",
                       (int)(m->value_end - m->value_off), sm->text + m->value_off);
}

struct member_list {
        struct json_scan_member m[4];
        int n;
};

static void remember_member(void *ud, const struct json_scan_member *m)
{
        struct member_list *seen = ud;

        if (seen->n < 4)
                seen->m[seen->n++] = *m;
}

/* Members of the top levels are handed over as their values end, with their spans. */
static void test_json_scan__members_of_the_top_levels(void **state)
{
        static const char text[] = "{\"a\":1, \"r\":{\"x\":[1,{\"deep\":2}],\"y\":{} },"
                                   "\"l\":[{\"z\":3}],\"s\":\"v\"}";
        struct seen_members sm = { .text = text };
        struct json_scan_result res;

        (void)state;
        assert_int_equal(json_scan_members(text, strlen(text), NULL,
                                           &(struct json_scan_members){
                                                   .depth = 2, .fn = log_member, .ud = &sm },
                                           &res),
                         CM_OK);
        /* deep and z (objects at depth 3) are not handed over */
        assert_string_equal(sm.log, "1:a=1;2:x(in r)=[1,{\"deep\":2}];2:y(in r)={};"
                                    "1:r={\"x\":[1,{\"deep\":2}],\"y\":{} };"
                                    "1:l=[{\"z\":3}];1:s=\"v\";");
}

static void test_json_scan__key_is_compares_decoded_keys(void **state)
{
        static const char text[] = "{\"request\":1,\"\\u0072equest\":2,\"req\\u0075est\":3,"
                                   "\"requests\":4,\"requ\":5,\"\":6}";
        size_t offs[6], n = 0;

        (void)state;
        for (size_t i = 1; text[i] && n < 6; i++) {
                if (text[i] == '"' && (text[i - 1] == '{' || text[i - 1] == ',')) /* a key */
                        offs[n++] = i;
        }
        assert_int_equal(n, 6);
        assert_true(json_scan_key_is(text, offs[0], "request"));
        assert_true(json_scan_key_is(text, offs[1], "request"));
        assert_true(json_scan_key_is(text, offs[2], "request"));
        assert_false(json_scan_key_is(text, offs[3], "request"));
        assert_false(json_scan_key_is(text, offs[4], "request"));
        assert_false(json_scan_key_is(text, offs[0], "requests"));
        assert_true(json_scan_key_is(text, offs[5], ""));
        assert_false(json_scan_key_is(text, offs[5], "r"));
}

/* Members carry their key's raw length and escape, and json_scan_key_eq matches them
 * decoded. */
static void test_json_scan__member_keys_compare_by_length_or_decoded(void **state)
{
        static const char text[] = "{\"r\\u0065q\":{\"kind\":1,\"\\u006bin\":2},\"kin\":3}";
        struct member_list seen = { .n = 0 };
        struct json_scan_result res;
        const struct json_scan_member *kind, *kin, *top;

        (void)state;
        assert_int_equal(json_scan_members(text, strlen(text), NULL,
                                           &(struct json_scan_members){
                                                   .depth = 2, .fn = remember_member, .ud = &seen },
                                           &res),
                         CM_OK);
        assert_int_equal(seen.n, 4);
        kind = &seen.m[0];
        kin = &seen.m[1];
        top = &seen.m[3];
        assert_int_equal(kind->key_len, 4);
        assert_false(kind->key_escaped);
        assert_int_equal(kind->parent_key_len, 8);
        assert_true(kind->parent_key_escaped);
        assert_true(
                json_scan_key_eq(text, kind->key_off, kind->key_len, kind->key_escaped, "kind", 4));
        assert_false(json_scan_key_eq(text, kind->key_off, kind->key_len, kind->key_escaped,
                                      "kinds", 5));
        assert_false(
                json_scan_key_eq(text, kind->key_off, kind->key_len, kind->key_escaped, "king", 4));
        assert_false(
                json_scan_key_eq(text, kind->key_off, kind->key_len, kind->key_escaped, "", 0));
        assert_true(json_scan_key_eq(text, kind->parent_key_off, kind->parent_key_len,
                                     kind->parent_key_escaped, "req", 3));
        /* \u006bin is "kin": equal only decoded */
        assert_true(kin->key_escaped);
        assert_true(json_scan_key_eq(text, kin->key_off, kin->key_len, kin->key_escaped, "kin", 3));
        assert_false(
                json_scan_key_eq(text, kin->key_off, kin->key_len, kin->key_escaped, "kind", 4));
        assert_int_equal(top->parent_key_off, SIZE_MAX);
        assert_true(json_scan_key_eq(text, top->key_off, top->key_len, top->key_escaped, "kin", 3));
}

static const char *const tree_docs[] = {
        "{\"a\":1,\"b\":[true,false,null,\"x\"],\"c\":{},\"d\":[],\"e\":\"\"}",
        " [ 1 , -0 , 0.5 , 1e3 , -1.25E-2 , 2147483647 , 2147483648 , -2147483648 , "
        "-2147483649 , 1e400 , -1e400 , 123456789012345678901234567890 , 0.1 , 1E+2 , "
        "999999999999999 , -123456789012345 , 9007199254740993 , 1000000000000000 , 0 ] ",
        "\"esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t end\"",
        "\"\\u00e9\\u4e2d\\ud83d\\ude00 \xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80 \\u0041\"",
        "{\"k\":{\"k2\":[[[{\"x\":\"y\"}]],[]]},\"n\":{\"m\":{}}}",
        "{\"\\u006bey\":\"v\",\"k\\\"q\":1,\"\":[\"\\\\\"]}",
        "\n\t {\"a\" :\t1 , \"b\"\r\n:\n[ ] }\r\n",
        "true",
        "false",
        "null",
        "-12.5e-3",
        "\"s\"",
        ("[{\"apiVersion\":\"v1\",\"kind\":\"MaasMachine\",\"spec\":{\"minCPU\":2,"
         "\"minMemory\":4096,\"tags\":[\"a\",\"b\"],\"x\":null}}]"),
};

/* json_scan_tree builds what cJSON builds, for a whole document and for a member's span. */
static void test_json_scan__tree_is_cjsons(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(tree_docs) / sizeof(tree_docs[0]); i++) {
                const char *text = tree_docs[i];
                size_t len = strlen(text);
                struct json_scan_result res;
                cJSON *ours;
                cJSON *ref = NULL;

                assert_int_equal(json_scan(text, len, NULL, &res), CM_OK);
                assert_int_equal(json_parse(text, len, &ref), CM_OK);
                ours = json_scan_tree(text, 0, len);
                if (!cjson_same(ours, ref))
                        fail_msg("document %zu: the tree differs from cJSON's", i);
                cJSON_Delete(ours);
                cJSON_Delete(ref);
        }
}

static void check_member_tree(void *ud, const struct json_scan_member *m)
{
        const char *text = ud;
        cJSON *ours = json_scan_tree(text, m->value_off, m->value_end);
        cJSON *ref = NULL;

        assert_int_equal(json_parse(text + m->value_off, m->value_end - m->value_off, &ref), CM_OK);
        assert_true(cjson_same(ours, ref));
        cJSON_Delete(ours);
        cJSON_Delete(ref);
}

static void test_json_scan__tree_of_a_member_is_cjsons(void **state)
{
        static const char text[] = "{\"request\":{\"object\":{\"a\":[1,2.5,\"\\u00e9\"],"
                                   "\"b\":{\"c\":true}},\"n\":-7},\"z\":\"last\"}";
        struct json_scan_result res;

        (void)state;
        assert_int_equal(
                json_scan_members(text, strlen(text), NULL,
                                  &(struct json_scan_members){ .depth = 3,
                                                               .fn = check_member_tree,
                                                               .ud = (void *)(uintptr_t)text },
                                  &res),
                CM_OK);
}

static void keep_string_values(void *ud, const struct json_scan_member *m)
{
        char **out = ud;
        const char *text = out[2];

        out[m->key_len == 1 ? 0 : 1] = json_scan_string_value(text, m->value_off, m->value_end);
}

/* A string value's span decodes as json_scan_string_dup decodes it, escapes or not. */
static void test_json_scan__string_value_of_a_span(void **state)
{
        static const char text[] = "{\"a\":\"plain text\",\"bb\":\"t\\u00e9\\n\\\"x\\\"\"}";
        char *out[3] = { NULL, NULL, (char *)(uintptr_t)text };
        struct json_scan_result res;

        (void)state;
        assert_int_equal(json_scan_members(text, strlen(text), NULL,
                                           &(struct json_scan_members){ .depth = 1,
                                                                        .fn = keep_string_values,
                                                                        .ud = out },
                                           &res),
                         CM_OK);
        assert_string_equal(out[0], "plain text");
        assert_string_equal(out[1], "t\xc3\xa9\n\"x\"");
        free(out[0]);
        free(out[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_json_scan__cases),
                cmocka_unit_test(test_json_scan__faults),
                cmocka_unit_test(test_json_scan__counts),
                cmocka_unit_test(test_json_scan__value_budget_names_the_figure),
                cmocka_unit_test(test_json_scan__string_budget),
                cmocka_unit_test(test_json_scan__depth_budget_names_the_place),
                cmocka_unit_test(test_json_scan__duplicates_found_past_the_inline_table),
                cmocka_unit_test(test_json_scan__duplicates_by_filter_and_by_hash),
                cmocka_unit_test(test_json_scan__open_members_are_capped),
                cmocka_unit_test(test_json_scan__messages_stay_valid_utf8),
                cmocka_unit_test(test_json_scan__members_of_the_top_levels),
                cmocka_unit_test(test_json_scan__key_is_compares_decoded_keys),
                cmocka_unit_test(test_json_scan__member_keys_compare_by_length_or_decoded),
                cmocka_unit_test(test_json_scan__tree_is_cjsons),
                cmocka_unit_test(test_json_scan__tree_of_a_member_is_cjsons),
                cmocka_unit_test(test_json_scan__string_value_of_a_span),
        };

        return cmocka_run_group_tests_name("json_scan", tests, NULL, NULL);
}
