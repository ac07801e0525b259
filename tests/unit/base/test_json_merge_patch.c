/* json_merge_patch: RFC 7386 as kube-sim and the reconciler tests' fake API apply it. */
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

/* target, patch, want */
static const char *const cases[][3] = {
        { "{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
        { "{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}" },
        { "{\"a\":\"b\"}", "{\"a\":null}", "{}" },
        { "{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}" },
        { "{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}" },
        { "{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}" },
        { "{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}", "{\"a\":{\"b\":\"d\"}}" },
        { "{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}" }, /* arrays are replaced */
        { "[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]" },
        { "{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]" },
        { "{\"a\":\"foo\"}", "null", "null" },
        { "{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}" }, /* a null already there stays */
        { "[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}" },
        { "{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}" },
};

static void test_json_merge_patch__rfc7386_cases(void **state)
{
        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                cJSON *patch = test_json("%s", cases[i][1]);
                cJSON *want = test_json("%s", cases[i][2]);
                cJSON *got = json_merge_patch(test_json("%s", cases[i][0]), patch);

                if (!cJSON_Compare(got, want, true)) {
                        char *text = cJSON_PrintUnformatted(got);

                        fail_msg("case %zu: got %s, want %s", i, text, cases[i][2]);
                }
                cJSON_Delete(got);
                cJSON_Delete(want);
                cJSON_Delete(patch);
        }
}

static void test_json_merge_patch__patch_is_not_consumed(void **state)
{
        cJSON *patch = test_json("{\"spec\":{\"x\":1}}");
        cJSON *a = json_merge_patch(NULL, patch);
        cJSON *b = json_merge_patch(cJSON_CreateObject(), patch);

        (void)state;
        assert_true(cJSON_Compare(a, b, true));
        assert_true(cJSON_Compare(a, patch, true));
        cJSON_Delete(a);
        cJSON_Delete(b);
        cJSON_Delete(patch);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_json_merge_patch__rfc7386_cases),
                cmocka_unit_test(test_json_merge_patch__patch_is_not_consumed),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
