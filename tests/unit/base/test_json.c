/*
 * Unit tests for json.h: parse strictness, type names, paths, error lists, typed getters
 * (integer range and integrality), JSON Pointer escaping and position-keeping setters.
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
#include "testutil.h"

/* json_elem_fn: parses the element and appends it to the array arg. */
static int parse_into(void *arg, const char *elem, size_t len)
{
        cJSON *tree = NULL;

        assert_int_equal(json_parse(elem, len, &tree), CM_OK);
        cJSON_AddItemToArray(arg, tree);
        return 0;
}

static void test_json__type_names(void **state)
{
        cJSON *root = test_json("{\"s\":\"x\",\"i\":3,\"n\":2.5,\"o\":{},\"a\":[],\"b\":true,"
                                "\"z\":null,\"big\":1e300}");

        static const struct {
                const char *key;
                const char *name;
        } cases[] = {
                { "s", "string" }, { "i", "integer" }, { "n", "number" }, { "o", "object" },
                { "a", "array" },  { "b", "boolean" }, { "z", "null" },   { "big", "integer" }
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                assert_string_equal(
                        json_type_name(cJSON_GetObjectItemCaseSensitive(root, cases[i].key)),
                        cases[i].name);
        assert_string_equal(json_type_name(NULL), "missing");
        cJSON_Delete(root);
}

static void test_json__parse_accepts_trailing_whitespace_only(void **state)
{
        static const char *bad[] = { "{} x", "{}{}", "[1] ,", "", "   ", "{\"a\":", "nul" };
        cJSON *root = (cJSON *)0x1;

        (void)state;
        assert_int_equal(json_parse("{\"a\":1} \n\t\r ", 12, &root), CM_OK);
        assert_true(cJSON_IsObject(root));
        cJSON_Delete(root);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                root = (cJSON *)0x1;
                assert_int_equal(json_parse(bad[i], strlen(bad[i]), &root), CM_EPARSE);
                assert_ptr_equal(root, (cJSON *)0x1); /* ret untouched on failure */
        }
        assert_int_equal(json_parse("{}\0", 3, &root), CM_EPARSE);
}

static void test_json__parse_honours_length_without_nul(void **state)
{
        const char text[] = "{\"a\":1}garbage";
        cJSON *root = NULL;

        (void)state;
        assert_int_equal(json_parse(text, 7, &root), CM_OK);
        assert_int_equal(cJSON_GetObjectItemCaseSensitive(root, "a")->valuedouble, 1);
        cJSON_Delete(root);
        assert_int_equal(json_parse(text, 8, &root), CM_EPARSE);
}

/* What json_array_each handed over: the elements joined with '|', or a stop. */
struct elems {
        char out[512];
        size_t len;
        int calls;
        int stop_at; /* return 9 on this call (1-based); 0 = never */
};

static int collect_elem(void *arg, const char *elem, size_t len)
{
        struct elems *e = arg;

        e->calls++;
        if (e->len && e->len < sizeof(e->out) - 1)
                e->out[e->len++] = '|';
        if (len > sizeof(e->out) - 1 - e->len)
                len = sizeof(e->out) - 1 - e->len;
        memcpy(e->out + e->len, elem, len);
        e->len += len;
        e->out[e->len] = '\0';
        return e->calls == e->stop_at ? 9 : 0;
}

static int each(const char *text, struct elems *e)
{
        return json_array_each(text, strlen(text), collect_elem, e);
}

static void test_json__array_each_hands_over_elements_as_text(void **state)
{
        static const char list[] = " [ {\"a\":[1,2,{\"b\":\"],}\"}]} , \"x\\\"],\" ,3.5e1,"
                                   "null\n,[],\t{} ]\r\n";
        struct elems e = { 0 };

        (void)state;
        assert_int_equal(each(list, &e), 0);
        assert_string_equal(e.out, "{\"a\":[1,2,{\"b\":\"],}\"}]}|\"x\\\"],\"|3.5e1|null|[]|{}");
        assert_int_equal(e.calls, 6);
        e = (struct elems){ 0 };
        assert_int_equal(each("[]", &e), 0);
        assert_int_equal(each(" [ \n ] ", &e), 0);
        assert_int_equal(e.calls, 0);
        e = (struct elems){ .stop_at = 2 };
        assert_int_equal(each("[1,2,3]", &e), 9);
        assert_string_equal(e.out, "1|2");
}

static void test_json__array_each_rejects_what_is_not_one_array(void **state)
{
        static const char *const bad[] = {
                "",      "  ",   "{}",         "1",       "[",       "[1",  "[1,",
                "[1,]",  "[,1]", "[1]x",       "[1] [2]", "[\"abc]", "[}]", "[1}",
                "[\"\\", "[[1]", "[{\"a\":1]", "\"[1]\"", "[1,,2]",  "]",
        };

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct elems e = { 0 };

                if (json_array_each(bad[i], strlen(bad[i]), collect_elem, &e) != CM_EPARSE)
                        fail_msg("accepted %s", bad[i]);
        }
}

/* Generated arrays with awkward strings: the elements handed over, parsed, are the
 * elements of the whole array, in order. */
static void test_json__array_each_matches_the_whole_parse(void **state)
{
        static const char *const strs[] = { "]", "[", ",", "\"", "\\", "}{", "a\\\"]", "" };
        uint64_t x = 0x9e3779b97f4a7c15u;

        (void)state;
        for (int round = 0; round < 300; round++) {
                cJSON *arr = cJSON_CreateArray(), *got = cJSON_CreateArray(), *obj;
                int n = round % 7;
                char *text;

                for (int i = 0; i < n; i++) {
                        x = x * 6364136223846793005u + 1442695040888963407u;
                        obj = cJSON_CreateObject();
                        cJSON_AddStringToObject(obj, strs[x % 8], strs[(x >> 8) % 8]);
                        cJSON_AddItemToObject(obj, "n", cJSON_CreateNumber((double)(x % 1000)));
                        if (x & 0x10000) {
                                cJSON_Delete(obj);
                                obj = cJSON_CreateString(strs[(x >> 20) % 8]);
                        }
                        cJSON_AddItemToArray(arr, obj);
                }
                text = round % 2 ? cJSON_Print(arr) : cJSON_PrintUnformatted(arr);
                assert_int_equal(json_array_each(text, strlen(text), parse_into, got), 0);
                assert_true(cJSON_Compare(arr, got, true));
                cJSON_free(text);
                cJSON_Delete(arr);
                cJSON_Delete(got);
        }
}

static void test_json__pointer_escape(void **state)
{
        static const char *cases[][2] = {
                { "a/b~c", "a~1b~0c" },
                { "~1", "~01" },
                { "cluster.x-k8s.io/paused", "cluster.x-k8s.io~1paused" },
                { "", "" },
                { "plain", "plain" },
        };
        char *s;

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                s = json_pointer_escape(cases[i][0]);
                assert_string_equal(s, cases[i][1]);
                free(s);
        }
}

static void test_json__path_builds_kubernetes_style(void **state)
{
        struct json_path p;
        size_t m1;
        size_t m2;

        (void)state;
        json_path_init(&p, "spec");
        m1 = json_path_push_field(&p, "template");
        (void)json_path_push_field(&p, "spec");
        m2 = json_path_push_field(&p, "tags");
        (void)json_path_push_index(&p, 2);
        assert_string_equal(json_path_str(&p), "spec.template.spec.tags[2]");
        json_path_pop(&p, m2);
        (void)json_path_push_key(&p, "foo");
        assert_string_equal(json_path_str(&p), "spec.template.spec.foo");
        json_path_pop(&p, m1);
        (void)json_path_push_key(&p, "cluster.x-k8s.io/cluster-name");
        assert_string_equal(json_path_str(&p), "spec[cluster.x-k8s.io/cluster-name]");
        json_path_init(&p, NULL);
        assert_string_equal(json_path_str(&p), "");
        (void)json_path_push_field(&p, "metadata");
        assert_string_equal(json_path_str(&p), "metadata");
}

static void test_json__path_truncates_long_paths(void **state)
{
        struct json_path p;
        char big[2 * JSON_PATH_MAX];

        (void)state;
        memset(big, 'k', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        json_path_init(&p, "metadata");
        (void)json_path_push_key(&p, big);
        assert_int_equal(strlen(json_path_str(&p)), JSON_PATH_MAX - 1);
        json_path_pop(&p, 8);
        assert_string_equal(json_path_str(&p), "metadata");
}

static void test_json__errors_cap_and_join(void **state)
{
        struct json_errors e;
        char *s;

        (void)state;
        json_errors_init(&e);
        json_errors_add(&e, "spec.a", "bad %d", 1);
        json_errors_add(&e, "", "whole object");
        s = json_errors_join(&e, "; ");
        assert_string_equal(s, "spec.a: bad 1; whole object");
        free(s);
        assert_true(json_errors_contains(&e, "spec.a: bad 1"));
        assert_false(json_errors_contains(&e, "spec.a: bad 2"));
        for (int i = 0; i < 70; i++)
                json_errors_add(&e, "x", "e%d", i);
        assert_int_equal(e.n, JSON_ERRORS_MAX);
        assert_int_equal(e.dropped, 72 - JSON_ERRORS_MAX);
        s = json_errors_join(&e, "; ");
        assert_non_null(strstr(s, ", and 8 more errors"));
        free(s);
        json_errors_release(&e);
        assert_int_equal(e.n, 0);
}

static void test_json__int64_rejects_unsafe_numbers(void **state)
{
        cJSON *root = test_json("{\"ok\":9007199254740991,\"neg\":-9007199254740991,"
                                "\"over\":9007199254740993,\"huge\":1e300,\"frac\":2.5,"
                                "\"str\":\"5\",\"nul\":null,\"zero\":-0}");
        struct json_errors e;
        struct json_dec d;
        int64_t v = 0;

        (void)state;
        json_errors_init(&e);
        json_dec_init(&d, "spec", &e);
        assert_int_equal(json_get_int64(&d, root, "ok", &v), CM_OK);
        assert_true(v == 9007199254740991LL);
        assert_int_equal(json_get_int64(&d, root, "neg", &v), CM_OK);
        assert_true(v == -9007199254740991LL);
        assert_int_equal(json_get_int64(&d, root, "zero", &v), CM_OK);
        assert_int_equal(v, 0);
        v = 42;
        assert_int_equal(json_get_int64(&d, root, "over", &v), CM_EINVAL);
        assert_int_equal(json_get_int64(&d, root, "huge", &v), CM_EINVAL);
        assert_int_equal(json_get_int64(&d, root, "frac", &v), CM_EINVAL);
        assert_int_equal(json_get_int64(&d, root, "str", &v), CM_EINVAL);
        assert_int_equal(v, 42);
        assert_int_equal(json_get_int64(&d, root, "nul", &v), CM_ENOTFOUND);
        assert_int_equal(json_get_int64(&d, root, "absent", &v), CM_ENOTFOUND);
        assert_int_equal(d.failures, 4);
        assert_true(json_errors_contains(&e, "spec.over: integer out of range (must be between "
                                             "-9007199254740991 and 9007199254740991)"));
        assert_true(json_errors_contains(&e, "spec.huge: integer out of range (must be between "
                                             "-9007199254740991 and 9007199254740991)"));
        assert_true(json_errors_contains(&e, "spec.frac: expected integer, got number"));
        assert_true(json_errors_contains(&e, "spec.str: expected integer, got string"));
        assert_string_equal(json_path_str(&d.path), "spec");
        json_errors_release(&e);
        cJSON_Delete(root);
}

static void test_json__getters_check_types(void **state)
{
        cJSON *root = test_json("{\"s\":\"x\",\"b\":true,\"o\":{},\"a\":[],\"n\":1}");
        struct json_errors e;
        struct json_dec d;
        const char *s = NULL;
        const cJSON *item = NULL;
        bool b = false;

        (void)state;
        json_errors_init(&e);
        json_dec_init(&d, NULL, &e);
        assert_int_equal(json_get_string(&d, root, "s", &s), CM_OK);
        assert_string_equal(s, "x");
        assert_int_equal(json_get_bool(&d, root, "b", &b), CM_OK);
        assert_true(b);
        assert_int_equal(json_get_object(&d, root, "o", &item), CM_OK);
        assert_int_equal(json_get_array(&d, root, "a", &item), CM_OK);
        assert_int_equal(json_get_string(&d, root, "n", &s), CM_EINVAL);
        assert_int_equal(json_get_bool(&d, root, "s", &b), CM_EINVAL);
        assert_int_equal(json_get_object(&d, root, "a", &item), CM_EINVAL);
        assert_int_equal(json_get_array(&d, root, "o", &item), CM_EINVAL);
        assert_true(json_errors_contains(&e, "n: expected string, got integer"));
        assert_true(json_errors_contains(&e, "s: expected boolean, got string"));
        assert_true(json_errors_contains(&e, "a: expected object, got array"));
        assert_true(json_errors_contains(&e, "o: expected array, got object"));
        /* Case-sensitive lookup: "S" is not "s". */
        assert_int_equal(json_get_string(NULL, root, "S", &s), CM_ENOTFOUND);
        /* NULL context: errors are neither recorded nor fatal. */
        assert_int_equal(json_get_string(NULL, root, "n", &s), CM_EINVAL);
        assert_int_equal(e.n, 4);
        json_errors_release(&e);
        cJSON_Delete(root);
}

static void test_json__setters_keep_position(void **state)
{
        cJSON *root = test_json("{\"a\":1,\"b\":\"old\",\"c\":null,\"d\":true}");
        cJSON *child;
        bool created = true;
        char *text;

        (void)state;
        json_set_string(root, "b", "new");
        json_set_int64(root, "e", 2147483648000LL); /* beyond int32: exact */
        json_set_bool(root, "a", false);
        json_remove_unless_null(root, "c");
        json_remove_unless_null(root, "d");
        json_remove_unless_null(root, "zz");
        child = json_child_object(root, "b", &created);
        assert_true(created);
        assert_ptr_equal(json_child_object(root, "b", &created), child);
        assert_false(created);
        text = cJSON_PrintUnformatted(root);
        assert_string_equal(text, "{\"a\":false,\"b\":{},\"c\":null,\"e\":2147483648000}");
        cJSON_free(text);
        cJSON_Delete(root);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_json__type_names),
                cmocka_unit_test(test_json__parse_accepts_trailing_whitespace_only),
                cmocka_unit_test(test_json__parse_honours_length_without_nul),
                cmocka_unit_test(test_json__pointer_escape),
                cmocka_unit_test(test_json__path_builds_kubernetes_style),
                cmocka_unit_test(test_json__path_truncates_long_paths),
                cmocka_unit_test(test_json__errors_cap_and_join),
                cmocka_unit_test(test_json__int64_rejects_unsafe_numbers),
                cmocka_unit_test(test_json__getters_check_types),
                cmocka_unit_test(test_json__setters_keep_position),
                cmocka_unit_test(test_json__array_each_hands_over_elements_as_text),
                cmocka_unit_test(test_json__array_each_rejects_what_is_not_one_array),
                cmocka_unit_test(test_json__array_each_matches_the_whole_parse),
        };

        return cmocka_run_group_tests_name("json", tests, NULL, NULL);
}
