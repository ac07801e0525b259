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

static cJSON *parse(const char *text)
{
        cJSON *root = NULL;

        assert_int_equal(json_parse(text, strlen(text), &root), CM_OK);
        return root;
}

static void test_json__type_names(void **state)
{
        cJSON *root = parse("{\"s\":\"x\",\"i\":3,\"n\":2.5,\"o\":{},\"a\":[],\"b\":true,"
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
        cJSON *root = parse("{\"ok\":9007199254740991,\"neg\":-9007199254740991,"
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
        cJSON *root = parse("{\"s\":\"x\",\"b\":true,\"o\":{},\"a\":[],\"n\":1}");
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
        cJSON *root = parse("{\"a\":1,\"b\":\"old\",\"c\":null,\"d\":true}");
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
        };

        return cmocka_run_group_tests_name("json", tests, NULL, NULL);
}
