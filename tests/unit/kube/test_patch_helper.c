/*
 * Unit tests for merge_patch_diff (RFC 7386): a table of hand-written cases (nested objects,
 * removed members, arrays replaced whole, type changes, nulls, equality), a property check
 * that applying the computed patch to `before` yields `after` over thousands of generated
 * pairs, and patch_helper_write's argument checks (the writes themselves are covered by the
 * integration test against kube-sim).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "kube_client.h"
#include "patch_helper.h"
#include "testutil.h"

/* Asserts diff(before, after) equals want (NULL = no patch). */
static void check_diff(const char *before, const char *after, const char *want)
{
        cJSON *b = test_json("%s", before);
        cJSON *a = test_json("%s", after);
        cJSON *w = want ? test_json("%s", want) : NULL;
        cJSON *got = (cJSON *)(uintptr_t)1;
        char *text;

        assert_int_equal(merge_patch_diff(b, a, &got), 0);
        if (!w) {
                if (got) {
                        text = cJSON_PrintUnformatted(got);
                        fail_msg("%s -> %s: expected no patch, got %s", before, after, text);
                }
        } else {
                assert_non_null(got);
                if (!cJSON_Compare(got, w, true)) {
                        text = cJSON_PrintUnformatted(got);
                        fail_msg("%s -> %s: expected %s, got %s", before, after, want, text);
                }
        }
        cJSON_Delete(got);
        cJSON_Delete(w);
        cJSON_Delete(a);
        cJSON_Delete(b);
}

static void test_patch_helper__equal_objects_give_no_patch(void **state)
{
        (void)state;
        check_diff("{}", "{}", NULL);
        check_diff("{\"a\":1,\"b\":{\"c\":[1,2,{\"d\":true}]}}",
                   "{\"b\":{\"c\":[1,2,{\"d\":true}]},\"a\":1}", NULL);
        check_diff("\"x\"", "\"x\"", NULL);
        check_diff("[1,2]", "[1,2]", NULL);
}

static void test_patch_helper__changed_scalar_is_replaced(void **state)
{
        (void)state;
        check_diff("{\"a\":1,\"b\":2}", "{\"a\":1,\"b\":3}", "{\"b\":3}");
        check_diff("{\"s\":\"x\"}", "{\"s\":\"y\"}", "{\"s\":\"y\"}");
        check_diff("{\"t\":true}", "{\"t\":false}", "{\"t\":false}");
        check_diff("{\"n\":1.5}", "{\"n\":1.25}", "{\"n\":1.25}");
}

static void test_patch_helper__added_member_is_copied(void **state)
{
        (void)state;
        check_diff("{}", "{\"a\":{\"b\":[1]}}", "{\"a\":{\"b\":[1]}}");
        check_diff("{\"a\":1}", "{\"a\":1,\"e\":{}}", "{\"e\":{}}");
}

static void test_patch_helper__removed_member_becomes_null(void **state)
{
        (void)state;
        check_diff("{\"a\":1,\"b\":2}", "{\"a\":1}", "{\"b\":null}");
        check_diff("{\"m\":{\"x\":1,\"y\":2}}", "{\"m\":{\"y\":2}}", "{\"m\":{\"x\":null}}");
        check_diff("{\"m\":{\"x\":1}}", "{\"m\":{}}", "{\"m\":{\"x\":null}}");
        check_diff("{\"m\":{\"x\":1}}", "{}", "{\"m\":null}");
}

static void test_patch_helper__nested_objects_recurse(void **state)
{
        (void)state;
        check_diff("{\"spec\":{\"a\":{\"b\":{\"c\":1,\"d\":2}},\"k\":\"v\"},\"z\":0}",
                   "{\"spec\":{\"a\":{\"b\":{\"c\":5,\"d\":2}},\"k\":\"v\"},\"z\":0}",
                   "{\"spec\":{\"a\":{\"b\":{\"c\":5}}}}");
        check_diff("{\"metadata\":{\"labels\":{\"a\":\"1\"},\"name\":\"n\"}}",
                   "{\"metadata\":{\"labels\":{\"a\":\"1\",\"b\":\"2\"},\"name\":\"n\"}}",
                   "{\"metadata\":{\"labels\":{\"b\":\"2\"}}}");
}

static void test_patch_helper__arrays_are_replaced_whole(void **state)
{
        (void)state;
        check_diff("{\"f\":[\"a\",\"b\"]}", "{\"f\":[\"a\"]}", "{\"f\":[\"a\"]}");
        check_diff("{\"f\":[\"a\"]}", "{\"f\":[\"a\",\"b\"]}", "{\"f\":[\"a\",\"b\"]}");
        check_diff("{\"f\":[1,2]}", "{\"f\":[2,1]}", "{\"f\":[2,1]}");
        check_diff("{\"f\":[{\"a\":1,\"b\":2}]}", "{\"f\":[{\"a\":1}]}", "{\"f\":[{\"a\":1}]}");
        check_diff("{\"f\":[1]}", "{\"f\":[]}", "{\"f\":[]}");
}

static void test_patch_helper__type_change_replaces_value(void **state)
{
        (void)state;
        check_diff("{\"v\":{\"a\":1}}", "{\"v\":[1]}", "{\"v\":[1]}");
        check_diff("{\"v\":[1]}", "{\"v\":{\"a\":1}}", "{\"v\":{\"a\":1}}");
        check_diff("{\"v\":\"1\"}", "{\"v\":1}", "{\"v\":1}");
        check_diff("{\"v\":1}", "{\"v\":{}}", "{\"v\":{}}");
        check_diff("{\"v\":true}", "{\"v\":\"true\"}", "{\"v\":\"true\"}");
        check_diff("{\"v\":{}}", "{\"v\":\"x\"}", "{\"v\":\"x\"}");
        /* not objects at the top: the patch is the new document */
        check_diff("[1]", "{\"a\":1}", "{\"a\":1}");
        check_diff("{\"a\":1}", "7", "7");
}

static void test_patch_helper__null_and_absent_are_the_same(void **state)
{
        (void)state;
        check_diff("{\"a\":null}", "{}", NULL);
        check_diff("{}", "{\"a\":null}", NULL);
        check_diff("{\"a\":1}", "{\"a\":null}", "{\"a\":null}");
        check_diff("{\"a\":null}", "{\"a\":1}", "{\"a\":1}");
        check_diff("{\"m\":{\"x\":null}}", "{\"m\":{}}", NULL);
}

static void test_patch_helper__rejects_null_arguments(void **state)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *ret = NULL;

        (void)state;
        assert_int_equal(merge_patch_diff(NULL, o, &ret), CM_EINVAL);
        assert_int_equal(merge_patch_diff(o, NULL, &ret), CM_EINVAL);
        assert_int_equal(merge_patch_diff(o, o, NULL), CM_EINVAL);
        assert_null(ret);
        cJSON_Delete(o);
}

/* --- property check: apply(before, diff(before, after)) == after ------------------------- */

/* RFC 7386 MergePatch(target, patch), written independently of the code under test. */
static cJSON *apply_patch(const cJSON *target, const cJSON *patch)
{
        cJSON *out;
        const cJSON *p;
        cJSON *cur;

        if (!cJSON_IsObject(patch))
                return cJSON_Duplicate(patch, true);
        out = cJSON_IsObject(target) ? cJSON_Duplicate(target, true) : cJSON_CreateObject();
        cJSON_ArrayForEach (p, patch) {
                if (cJSON_IsNull(p)) {
                        cJSON_DeleteItemFromObjectCaseSensitive(out, p->string);
                        continue;
                }
                cur = cJSON_DetachItemFromObjectCaseSensitive(out, p->string);
                cJSON_AddItemToObject(out, p->string, apply_patch(cur, p));
                cJSON_Delete(cur);
        }
        return out;
}

/* Drops every null member, recursively (null means unset). */
static void strip_nulls(cJSON *x)
{
        cJSON *c = x ? x->child : NULL;
        cJSON *next;

        while (c) {
                next = c->next;
                if (cJSON_IsObject(x) && cJSON_IsNull(c))
                        cJSON_Delete(cJSON_DetachItemViaPointer(x, c));
                else
                        strip_nulls(c);
                c = next;
        }
}

static uint32_t rng_next(uint32_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 17;
        *s ^= *s << 5;
        return *s;
}

static cJSON *gen_value(uint32_t *s, int depth);

static cJSON *gen_object(uint32_t *s, int depth)
{
        static const char *const keys[] = { "a", "b", "c", "spec", "status" };
        cJSON *o = cJSON_CreateObject();
        uint32_t n = rng_next(s) % 5;

        for (uint32_t i = 0; i < n; i++) {
                const char *k = keys[rng_next(s) % 5];

                if (!cJSON_GetObjectItemCaseSensitive(o, k))
                        cJSON_AddItemToObject(o, k, gen_value(s, depth + 1));
        }
        return o;
}

static cJSON *gen_value(uint32_t *s, int depth)
{
        cJSON *a;

        switch (rng_next(s) % (depth > 3 ? 4 : 7)) {
        case 0:
                return cJSON_CreateNumber((double)(rng_next(s) % 3));
        case 1:
                return cJSON_CreateString(rng_next(s) % 2 ? "x" : "y");
        case 2:
                return cJSON_CreateBool(rng_next(s) % 2);
        case 3:
                return cJSON_CreateNull();
        case 4:
                a = cJSON_CreateArray();
                for (uint32_t i = rng_next(s) % 3; i > 0; i--)
                        cJSON_AddItemToArray(a, gen_value(s, depth + 1));
                return a;
        default:
                return gen_object(s, depth);
        }
}

/* after = before with random members changed, removed or added, at every level. */
static void mutate(cJSON *o, uint32_t *s, int depth)
{
        cJSON *c = o->child;
        cJSON *next;

        while (c) {
                next = c->next;
                switch (rng_next(s) % 6) {
                case 0:
                        cJSON_Delete(cJSON_DetachItemViaPointer(o, c));
                        break;
                case 1:
                        cJSON_ReplaceItemInObjectCaseSensitive(o, c->string,
                                                               gen_value(s, depth + 1));
                        break;
                case 2:
                        if (cJSON_IsObject(c))
                                mutate(c, s, depth + 1);
                        break;
                default:
                        break;
                }
                c = next;
        }
        if (rng_next(s) % 4 == 0 && !cJSON_GetObjectItemCaseSensitive(o, "new"))
                cJSON_AddItemToObject(o, "new", gen_value(s, depth + 1));
}

static void test_patch_helper__patch_applied_to_before_gives_after(void **state)
{
        uint32_t seed = 2463534242u;
        unsigned nonempty = 0, empty = 0;

        (void)state;
        for (int i = 0; i < 5000; i++) {
                cJSON *before = gen_object(&seed, 0);
                cJSON *after = cJSON_Duplicate(before, true);
                cJSON *patch = NULL;
                cJSON *result;

                mutate(after, &seed, 0);
                assert_int_equal(merge_patch_diff(before, after, &patch), 0);
                result = patch ? apply_patch(before, patch) : cJSON_Duplicate(before, true);
                strip_nulls(result);
                strip_nulls(after);
                if (!cJSON_Compare(result, after, true)) {
                        char *b = cJSON_PrintUnformatted(before);
                        char *p = cJSON_PrintUnformatted(patch);

                        fail_msg("case %d: before %s patch %s", i, b, p ? p : "NULL");
                }
                if (patch)
                        nonempty++;
                else
                        empty++;
                cJSON_Delete(result);
                cJSON_Delete(patch);
                cJSON_Delete(after);
                cJSON_Delete(before);
        }
        /* the generator exercised both outcomes */
        assert_true(nonempty > 1000);
        assert_true(empty > 100);
}

/* A patch never carries a member whose value did not change (minimality). */
static void test_patch_helper__patch_holds_only_changes(void **state)
{
        uint32_t seed = 88172645u;

        (void)state;
        for (int i = 0; i < 2000; i++) {
                cJSON *before = gen_object(&seed, 0);
                cJSON *after = cJSON_Duplicate(before, true);
                cJSON *patch = NULL;
                const cJSON *p;

                mutate(after, &seed, 0);
                assert_int_equal(merge_patch_diff(before, after, &patch), 0);
                cJSON_ArrayForEach (p, patch) {
                        const cJSON *b = cJSON_GetObjectItemCaseSensitive(before, p->string);
                        const cJSON *a = cJSON_GetObjectItemCaseSensitive(after, p->string);

                        assert_false(b && a && cJSON_Compare(a, b, true));
                }
                cJSON_Delete(patch);
                cJSON_Delete(after);
                cJSON_Delete(before);
        }
}

static void test_patch_helper__write_rejects_object_without_name(void **state)
{
        static const struct kube_resource res = { "", "v1", "configmaps", "ConfigMap", true };
        cJSON *b = test_json("{\"metadata\":{\"namespace\":\"default\"},\"data\":{}}");
        cJSON *a = test_json("{\"metadata\":{\"namespace\":\"default\"},\"data\":{\"k\":\"v\"}}");
        cJSON *arr = test_json("[]");
        unsigned writes = 99;

        (void)state;
        /* no client is touched: the arguments are checked first */
        assert_int_equal(patch_helper_write(NULL, &res, b, a, NULL, &writes, NULL), CM_EINVAL);
        assert_int_equal(patch_helper_write(NULL, &res, arr, a, NULL, &writes, NULL), CM_EINVAL);
        assert_int_equal(patch_helper_write(NULL, &res, b, arr, NULL, &writes, NULL), CM_EINVAL);
        assert_int_equal(writes, 99);
        cJSON_Delete(arr);
        cJSON_Delete(a);
        cJSON_Delete(b);
}

static void test_patch_helper__write_unchanged_sends_nothing(void **state)
{
        static const struct kube_resource res = { "", "v1", "configmaps", "ConfigMap", true };
        cJSON *b = test_json("{\"metadata\":{\"name\":\"n\",\"namespace\":\"default\"},"
                             "\"spec\":{\"x\":[1]},\"status\":{\"ready\":true}}");
        cJSON *latest = (cJSON *)(uintptr_t)1;
        unsigned writes = 99;

        (void)state;
        /* with no change the client (NULL here) is never used */
        assert_int_equal(patch_helper_write(NULL, &res, b, b, &latest, &writes, NULL), 0);
        assert_int_equal(writes, 0);
        assert_null(latest);
        cJSON_Delete(b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_patch_helper__equal_objects_give_no_patch),
                cmocka_unit_test(test_patch_helper__changed_scalar_is_replaced),
                cmocka_unit_test(test_patch_helper__added_member_is_copied),
                cmocka_unit_test(test_patch_helper__removed_member_becomes_null),
                cmocka_unit_test(test_patch_helper__nested_objects_recurse),
                cmocka_unit_test(test_patch_helper__arrays_are_replaced_whole),
                cmocka_unit_test(test_patch_helper__type_change_replaces_value),
                cmocka_unit_test(test_patch_helper__null_and_absent_are_the_same),
                cmocka_unit_test(test_patch_helper__rejects_null_arguments),
                cmocka_unit_test(test_patch_helper__patch_applied_to_before_gives_after),
                cmocka_unit_test(test_patch_helper__patch_holds_only_changes),
                cmocka_unit_test(test_patch_helper__write_rejects_object_without_name),
                cmocka_unit_test(test_patch_helper__write_unchanged_sends_nothing),
        };

        return cmocka_run_group_tests_name("patch_helper", tests, NULL, NULL);
}
