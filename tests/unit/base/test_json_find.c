/* json_find / json_at: the one nested accessor. Keys may hold dots with json_find; json_at
 * walks dotted paths and array indexes; a missing step or a wrong type is NULL, never a
 * crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "compiler.h"
#include "json.h"
#include "testutil.h"

static const char doc[] = "{\"metadata\":{\"annotations\":{\"cluster.x-k8s.io/paused\":\"\"},"
                          "\"name\":\"m1\"},\"status\":{\"ready\":true,\"addresses\":["
                          "{\"type\":\"Hostname\",\"address\":\"h1\"},"
                          "{\"type\":\"ExternalIP\",\"address\":\"10.0.0.5\"}]}}";

static void test_json_find__keys_with_dots(void **state)
{
        cJSON *o = test_json("%s", doc);

        (void)state;
        assert_string_equal(
                json_find_str(o, "metadata", "annotations", "cluster.x-k8s.io/paused", NULL), "");
        assert_string_equal(json_find_str(o, "metadata", "name", NULL), "m1");
        assert_true(cJSON_IsTrue(json_find(o, "status", "ready", NULL)));
        assert_ptr_equal(json_find(o, NULL), o);
        cJSON_Delete(o);
}

static void test_json_find__missing_or_wrong_type_is_null(void **state)
{
        cJSON *o = test_json("%s", doc);

        (void)state;
        assert_null(json_find(o, "spec", "x", NULL));
        assert_null(json_find(o, "metadata", "name", "deeper", NULL)); /* a string has no keys */
        assert_null(json_find_str(o, "status", "ready", NULL));        /* not a string */
        assert_null(json_find(o, "status", "addresses", "0", NULL));   /* arrays: json_at */
        assert_null(json_find(NULL, "a", NULL));
        cJSON_Delete(o);
}

static void test_json_at__dotted_paths_and_indexes(void **state)
{
        cJSON *o = test_json("%s", doc);
        static const char *const found[][2] = {
                { "status.addresses.1.address", "10.0.0.5" },
                { "status.addresses.0.type", "Hostname" },
                { "metadata.name", "m1" },
        };
        static const char *const missing[] = {
                "status.addresses.2",
                "status.addresses.x",
                "status.addresses.-1",
                "status..ready",
                "status.addresses.99999999999999999999",
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(found); i++)
                assert_string_equal(json_at_str(o, found[i][0]), found[i][1]);
        for (size_t i = 0; i < ARRAY_SIZE(missing); i++)
                assert_null(json_at(o, missing[i]));
        assert_ptr_equal(json_at(o, ""), o);
        assert_null(json_at_str(o, "status.ready")); /* not a string */
        cJSON_Delete(o);
}

static void test_json_at__walks_nested_arrays_and_odd_roots(void **state)
{
        cJSON *o = test_json("[[1,{\"k\":\"v\"}],\"s\"]");

        (void)state;
        assert_string_equal(json_at_str(o, "0.1.k"), "v");
        assert_string_equal(json_at_str(o, "1"), "s");
        assert_null(json_at(o, "1.k"));       /* a string has no members */
        assert_null(json_find(o, "0", NULL)); /* json_find reads objects only */
        assert_null(json_at(NULL, "a"));
        assert_ptr_equal(json_at(o, NULL), o);
        cJSON_Delete(o);
}

/* json_item answers as cJSON_GetObjectItemCaseSensitive: the first member of a name, names
 * sharing a first byte told apart, an array or a nameless item ends the walk. */
static void test_json_item__as_cjson_lookup(void **state)
{
        cJSON *o = test_json("{\"name\":1,\"namespace\":2,\"n\":3,\"name\":4,\"\":5}");
        cJSON *arr = test_json("[1,2]");
        const char *keys[] = { "name", "namespace", "n", "", "na", "x" };

        (void)state;
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                assert_ptr_equal(json_item(o, keys[i]),
                                 cJSON_GetObjectItemCaseSensitive(o, keys[i]));
        assert_int_equal(json_item(o, "name")->valueint, 1);
        assert_null(json_item(arr, "0"));
        assert_null(json_item(NULL, "name"));
        assert_null(json_item(o, NULL));
        free(o->child->next->string); /* a nameless item stops the walk, as in cJSON */
        o->child->next->string = NULL;
        assert_null(json_item(o, "n"));
        assert_null(cJSON_GetObjectItemCaseSensitive(o, "n"));
        cJSON_Delete(arr);
        cJSON_Delete(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_json_find__keys_with_dots),
                cmocka_unit_test(test_json_item__as_cjson_lookup),
                cmocka_unit_test(test_json_find__missing_or_wrong_type_is_null),
                cmocka_unit_test(test_json_at__dotted_paths_and_indexes),
                cmocka_unit_test(test_json_at__walks_nested_arrays_and_odd_roots),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
