/* admission_response_encode: an allowed response is printed without building a cJSON tree;
 * its bytes must be exactly those cJSON_PrintUnformatted gives for the same response
 * (escapes of the uid and warnings, the patch, the v1beta1 envelope). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "admission.h"
#include "base64.h"
#include "xalloc.h"

/* What the response looks like when cJSON builds and prints it. */
static char *reference(const struct admission_request *req, const struct admission_response *resp)
{
        cJSON *root = cJSON_CreateObject();
        cJSON *r;
        char *text;
        char *out;

        cJSON_AddStringToObject(root, "apiVersion",
                                req->version == ADMISSION_V1 ? "admission.k8s.io/v1"
                                                             : "admission.k8s.io/v1beta1");
        cJSON_AddStringToObject(root, "kind", "AdmissionReview");
        r = cJSON_AddObjectToObject(root, "response");
        cJSON_AddStringToObject(r, "uid", req->uid);
        cJSON_AddBoolToObject(r, "allowed", true);
        if (resp->patch && cJSON_GetArraySize(resp->patch) > 0) {
                char *p = cJSON_PrintUnformatted(resp->patch);
                char *b64 = base64_encode(p, strlen(p));

                cJSON_AddStringToObject(r, "patchType", "JSONPatch");
                cJSON_AddStringToObject(r, "patch", b64);
                free(b64);
                cJSON_free(p);
        }
        if (resp->n_warnings) {
                cJSON *w = cJSON_AddArrayToObject(r, "warnings");

                for (size_t i = 0; i < resp->n_warnings; i++)
                        cJSON_AddItemToArray(w, cJSON_CreateString(resp->warnings[i]));
        }
        text = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        out = xstrdup(text);
        cJSON_free(text);
        return out;
}

static void check_same(const struct admission_request *req, const struct admission_response *resp)
{
        char *want = reference(req, resp);
        char *got = NULL;

        assert_int_equal(admission_response_encode(req, resp, &got), 0);
        assert_string_equal(got, want);
        free(got);
        free(want);
}

static void test_admission_encode__allowed_is_what_cjson_prints(void **state)
{
        char uid[] = "705ab4f5-6393-11e8-b7cc-42010a800002";
        struct admission_request req = { .version = ADMISSION_V1, .uid = uid };
        struct admission_response resp = { .allowed = true };

        (void)state;
        check_same(&req, &resp);
        req.version = ADMISSION_V1BETA1;
        check_same(&req, &resp);
}

static void test_admission_encode__escapes_match_cjson(void **state)
{
        char uid[40] = "q\"b\\s/\b\f\n\r\t\x01\x1f\x7f\xc3\xa9 end";
        struct admission_request req = { .version = ADMISSION_V1, .uid = uid };
        struct admission_response resp = { .allowed = true };

        (void)state;
        check_same(&req, &resp);
        resp.warnings[resp.n_warnings++] = xstrdup("spec.image: \"x\"\n\x02 is deprecated");
        resp.warnings[resp.n_warnings++] = xstrdup("");
        resp.warnings[resp.n_warnings++] = xstrdup("plain");
        check_same(&req, &resp);
        admission_response_release(&resp);
        uid[0] = '\0'; /* an empty string prints as "" */
        resp.allowed = true;
        check_same(&req, &resp);
}

static void test_admission_encode__patch_and_warnings(void **state)
{
        char uid[] = "u1";
        struct admission_request req = { .version = ADMISSION_V1, .uid = uid };
        struct admission_response resp = { .allowed = true };

        (void)state;
        resp.patch = cJSON_Parse("[{\"op\":\"add\",\"path\":\"/spec/minCPU\",\"value\":1}]");
        assert_non_null(resp.patch);
        check_same(&req, &resp);
        resp.warnings[resp.n_warnings++] = xstrdup("w");
        check_same(&req, &resp);
        cJSON_Delete(resp.patch);
        resp.patch = cJSON_CreateArray(); /* empty: no patch members */
        check_same(&req, &resp);
        admission_response_release(&resp);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_admission_encode__allowed_is_what_cjson_prints),
                cmocka_unit_test(test_admission_encode__escapes_match_cjson),
                cmocka_unit_test(test_admission_encode__patch_and_warnings),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
