/*
 * Admission of MaasRemediation and MaasRemediationTemplate (docs/remediation.md): a strategy
 * other than Reboot, a negative or too large retryLimit, and a timeout that is not a positive
 * duration are denied naming the field (for the template at spec.template.spec.strategy);
 * the mutating webhook fills in the missing members and nothing else; the codec keeps
 * status without the ready/initialization members of the other kinds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "../../../webhooks/webhook_kinds.h"
#include "admission.h"
#include "json.h"
#include "schema.h"
#include "xalloc.h"

static char obj_name[] = "r1";

/* A CREATE review of kind with strategy (JSON text, or NULL for none). */
static cJSON *object(const char *kind, const char *strategy)
{
        bool tmpl = strcmp(kind, SCHEMA_KIND_REMEDIATION_TEMPLATE) == 0;
        char *spec = strategy ? xasprintf("{\"strategy\":%s}", strategy) : xstrdup("{}");
        char *doc = xasprintf("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                              "\"kind\":\"%s\",\"metadata\":{\"name\":\"r1\",\"namespace\":\"d\"},"
                              "\"spec\":%s%s%s}",
                              kind, tmpl ? "{\"template\":{\"spec\":" : "", spec, tmpl ? "}}" : "");
        cJSON *o = cJSON_Parse(doc);

        assert_non_null(o);
        free(doc);
        free(spec);
        return o;
}

static void validate(const char *kind, const char *strategy, struct admission_response *resp)
{
        struct admission_request req = { .op = ADMISSION_OP_CREATE,
                                         .name = obj_name,
                                         .object = object(kind, strategy) };

        *resp = (struct admission_response){ 0 };
        webhook_validate(kind, &req, resp);
        cJSON_Delete(req.object);
}

static void assert_denied(const char *kind, const char *strategy, const char *text)
{
        struct admission_response resp;

        validate(kind, strategy, &resp);
        assert_false(resp.allowed);
        assert_int_equal(resp.code, 422);
        if (!strstr(resp.message, text))
                fail_msg("denial \"%s\" lacks \"%s\"", resp.message, text);
        admission_response_release(&resp);
}

static void assert_allowed(const char *kind, const char *strategy)
{
        struct admission_response resp;

        validate(kind, strategy, &resp);
        if (!resp.allowed)
                fail_msg("denied: %s", resp.message);
        admission_response_release(&resp);
}

static void test_remediation__other_strategies_denied_naming_the_field(void **state)
{
        (void)state;
        assert_denied(SCHEMA_KIND_REMEDIATION, "{\"type\":\"Reprovision\"}",
                      "spec.strategy.type: Unsupported value: \"Reprovision\": supported values: "
                      "\"Reboot\"");
        assert_denied(SCHEMA_KIND_REMEDIATION_TEMPLATE, "{\"type\":\"reboot\"}",
                      "spec.template.spec.strategy.type: Unsupported value: \"reboot\"");
        assert_allowed(SCHEMA_KIND_REMEDIATION, "{\"type\":\"Reboot\"}");
        assert_allowed(SCHEMA_KIND_REMEDIATION_TEMPLATE,
                       "{\"type\":\"Reboot\",\"retryLimit\":2,\"timeout\":\"90s\"}");
}

static void test_remediation__negative_retry_limit_denied_naming_the_field(void **state)
{
        (void)state;
        assert_denied(SCHEMA_KIND_REMEDIATION, "{\"retryLimit\":-1}",
                      "spec.strategy.retryLimit: Invalid value: -1: must be greater than or "
                      "equal to 0");
        assert_denied(SCHEMA_KIND_REMEDIATION_TEMPLATE, "{\"retryLimit\":-3}",
                      "spec.template.spec.strategy.retryLimit: Invalid value: -3");
        assert_denied(SCHEMA_KIND_REMEDIATION, "{\"retryLimit\":11}",
                      "spec.strategy.retryLimit: Invalid value: 11: must be less than or equal "
                      "to 10");
        assert_denied(SCHEMA_KIND_REMEDIATION, "{\"retryLimit\":\"2\"}",
                      "spec.strategy.retryLimit: Invalid value: expected integer, got string");
        assert_allowed(SCHEMA_KIND_REMEDIATION, "{\"retryLimit\":0}");
}

static void test_remediation__timeouts_must_be_positive_durations(void **state)
{
        static const char *const bad[] = { "-5m", "0s", "0", "5", "soon", "25h", "" };
        char strategy[64];
        char want[128];

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                (void)snprintf(strategy, sizeof(strategy), "{\"timeout\":\"%s\"}", bad[i]);
                (void)snprintf(want, sizeof(want), "spec.strategy.timeout: Invalid value: \"%s\"",
                               bad[i]);
                assert_denied(SCHEMA_KIND_REMEDIATION, strategy, want);
                (void)snprintf(want, sizeof(want),
                               "spec.template.spec.strategy.timeout: Invalid value: \"%s\"",
                               bad[i]);
                assert_denied(SCHEMA_KIND_REMEDIATION_TEMPLATE, strategy, want);
        }
        assert_allowed(SCHEMA_KIND_REMEDIATION, "{\"timeout\":\"1h30m\"}");
        assert_allowed(SCHEMA_KIND_REMEDIATION, "{\"timeout\":\"300s\"}");
}

static void test_remediation__every_error_at_once(void **state)
{
        struct admission_response resp;

        (void)state;
        validate(SCHEMA_KIND_REMEDIATION,
                 "{\"type\":\"Hard\",\"retryLimit\":-1,\"timeout\":\"-1s\"}", &resp);
        assert_false(resp.allowed);
        assert_int_equal(cJSON_GetArraySize(json_find(resp.causes, NULL)), 3);
        admission_response_release(&resp);
}

static cJSON *defaults(const char *kind, const char *strategy)
{
        struct admission_request req = { .op = ADMISSION_OP_CREATE,
                                         .name = obj_name,
                                         .object = object(kind, strategy) };
        struct admission_response resp = { 0 };
        cJSON *patch;

        webhook_default(kind, &req, &resp);
        assert_true(resp.allowed);
        patch = resp.patch ? cJSON_Duplicate(resp.patch, true) : NULL;
        admission_response_release(&resp);
        cJSON_Delete(req.object);
        return patch;
}

static void assert_patch(cJSON *patch, const char *want)
{
        char *got = patch ? cJSON_PrintUnformatted(patch) : xstrdup("null");

        assert_string_equal(got, want);
        free(got);
        cJSON_Delete(patch);
}

static void test_remediation__defaults_fill_only_what_is_missing(void **state)
{
        (void)state;
        assert_patch(defaults(SCHEMA_KIND_REMEDIATION, NULL),
                     "[{\"op\":\"add\",\"path\":\"/spec/strategy\",\"value\":{\"type\":\"Reboot\","
                     "\"retryLimit\":1,\"timeout\":\"5m0s\"}}]");
        assert_patch(defaults(SCHEMA_KIND_REMEDIATION_TEMPLATE, "{\"retryLimit\":2}"),
                     "[{\"op\":\"add\",\"path\":\"/spec/template/spec/strategy/type\",\"value\":"
                     "\"Reboot\"},{\"op\":\"add\",\"path\":\"/spec/template/spec/strategy/"
                     "timeout\",\"value\":\"5m0s\"}]");
        assert_patch(defaults(SCHEMA_KIND_REMEDIATION,
                              "{\"type\":\"Reboot\",\"retryLimit\":0,\"timeout\":\"1m\"}"),
                     "null");
        /* a strategy of the wrong type is left for validation to name */
        assert_patch(defaults(SCHEMA_KIND_REMEDIATION, "[]"), "null");
}

static void test_remediation__codec_round_trip_keeps_plain_status(void **state)
{
        const char *doc = "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                          "\"kind\":\"MaasRemediation\",\"metadata\":{\"name\":\"m1\"},"
                          "\"spec\":{\"strategy\":{\"type\":\"Reboot\",\"retryLimit\":2,"
                          "\"timeout\":\"5m\",\"future\":1}},"
                          "\"status\":{\"phase\":\"Waiting\",\"retryCount\":1,"
                          "\"lastRemediated\":\"2026-12-02T12:00:00Z\"}}";
        cJSON *in = cJSON_Parse(doc);
        struct maas_remediation r;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_remediation_decode(in, &r, NULL), 0);
        assert_string_equal(r.spec.strategy->type, "Reboot");
        assert_int_equal(r.spec.strategy->retry_limit, 2);
        assert_string_equal(r.status.phase, "Waiting");
        assert_int_equal(r.status.retry_count, 1);
        r.status.retry_count = 2;
        assert_int_equal(maas_remediation_encode(&r, &out), 0);
        assert_int_equal(json_find(out, "status", "retryCount", NULL)->valueint, 2);
        assert_null(json_find(out, "status", "ready", NULL));
        assert_null(json_find(out, "status", "initialization", NULL));
        assert_non_null(json_find(out, "spec", "strategy", "future", NULL));
        maas_remediation_release(&r);
        cJSON_Delete(out);
        cJSON_Delete(in);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_remediation__other_strategies_denied_naming_the_field),
                cmocka_unit_test(test_remediation__negative_retry_limit_denied_naming_the_field),
                cmocka_unit_test(test_remediation__timeouts_must_be_positive_durations),
                cmocka_unit_test(test_remediation__every_error_at_once),
                cmocka_unit_test(test_remediation__defaults_fill_only_what_is_missing),
                cmocka_unit_test(test_remediation__codec_round_trip_keeps_plain_status),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
