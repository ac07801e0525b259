/*
 * Admission of spec.nodeReuse and spec.release (docs/host-reuse.md): release.erase other than
 * none, quick or secure is denied naming the field; secure erase with nodeReuse is denied
 * (nothing would be left to keep), on a MaasMachine and in a MaasMachineTemplate; a template
 * that reuses hosts is admitted with the warning that maxSurge: 0 is what makes reuse work;
 * the fields survive the codec (a MaasMachine made from the template carries them).
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

static char obj_name[] = "m1";

#define BASE "\"image\":\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096"

/* A CREATE review of kind with spec members extra (JSON text after BASE). */
static cJSON *object(const char *kind, const char *extra)
{
        bool tmpl = strcmp(kind, SCHEMA_KIND_MACHINE_TEMPLATE) == 0;
        char *doc =
                xasprintf("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                          "\"kind\":\"%s\",\"metadata\":{\"name\":\"m1\",\"namespace\":\"d\"},"
                          "\"spec\":%s{" BASE "%s}%s}",
                          kind, tmpl ? "{\"template\":{\"spec\":" : "", extra, tmpl ? "}}" : "");
        cJSON *o = cJSON_Parse(doc);

        assert_non_null(o);
        free(doc);
        return o;
}

static void validate(const char *kind, const char *extra, struct admission_response *resp)
{
        struct admission_request req = { .op = ADMISSION_OP_CREATE,
                                         .name = obj_name,
                                         .object = object(kind, extra) };

        *resp = (struct admission_response){ 0 };
        webhook_validate(kind, &req, resp);
        cJSON_Delete(req.object);
}

static void assert_denied(const char *kind, const char *extra, const char *text)
{
        struct admission_response resp;

        validate(kind, extra, &resp);
        assert_false(resp.allowed);
        assert_int_equal(resp.code, 422);
        if (!strstr(resp.message, text))
                fail_msg("denial \"%s\" lacks \"%s\"", resp.message, text);
        admission_response_release(&resp);
}

/* Admitted; returns how many warnings mention maxSurge. */
static size_t assert_allowed(const char *kind, const char *extra)
{
        struct admission_response resp;
        size_t n = 0;

        validate(kind, extra, &resp);
        if (!resp.allowed)
                fail_msg("denied: %s", resp.message);
        for (size_t i = 0; i < resp.n_warnings; i++)
                n += strstr(resp.warnings[i], "maxSurge: 0") != NULL;
        admission_response_release(&resp);
        return n;
}

static void test_reuse__unknown_erase_denied_naming_the_field(void **state)
{
        (void)state;
        assert_denied(SCHEMA_KIND_MACHINE, ",\"release\":{\"erase\":\"full\"}",
                      "spec.release.erase: Unsupported value: \"full\": supported values: "
                      "\"none\", \"quick\", \"secure\"");
        assert_denied(SCHEMA_KIND_MACHINE_TEMPLATE, ",\"release\":{\"erase\":\"Quick\"}",
                      "spec.template.spec.release.erase: Unsupported value: \"Quick\"");
        assert_denied(SCHEMA_KIND_MACHINE, ",\"release\":{\"erase\":true}",
                      "spec.release.erase: Invalid value");
        assert_denied(SCHEMA_KIND_MACHINE, ",\"nodeReuse\":\"yes\"", "spec.nodeReuse");
        assert_int_equal(assert_allowed(SCHEMA_KIND_MACHINE, ",\"release\":{\"erase\":\"none\"}"),
                         0);
        assert_int_equal(assert_allowed(SCHEMA_KIND_MACHINE, ",\"release\":{\"erase\":\"quick\"}"),
                         0);
        assert_int_equal(assert_allowed(SCHEMA_KIND_MACHINE, ",\"release\":{\"erase\":\"secure\"}"),
                         0);
}

static void test_reuse__secure_erase_with_node_reuse_denied(void **state)
{
        (void)state;
        assert_denied(SCHEMA_KIND_MACHINE, ",\"nodeReuse\":true,\"release\":{\"erase\":\"secure\"}",
                      "spec.release.erase: Invalid value: \"secure\": secure erase leaves "
                      "nothing on the host to keep: not allowed with nodeReuse");
        assert_denied(SCHEMA_KIND_MACHINE_TEMPLATE,
                      ",\"nodeReuse\":true,\"release\":{\"erase\":\"secure\"}",
                      "spec.template.spec.release.erase: Invalid value: \"secure\"");
        /* quick erase or none keeps something worth reusing (the host itself, its firmware) */
        (void)assert_allowed(SCHEMA_KIND_MACHINE,
                             ",\"nodeReuse\":true,\"release\":{\"erase\":\"quick\"}");
        (void)assert_allowed(SCHEMA_KIND_MACHINE, ",\"nodeReuse\":false,"
                                                  "\"release\":{\"erase\":\"secure\"}");
}

static void test_reuse__reusing_template_warns_about_surge(void **state)
{
        struct admission_response resp;

        (void)state;
        validate(SCHEMA_KIND_MACHINE_TEMPLATE, ",\"nodeReuse\":true", &resp);
        assert_true(resp.allowed);
        assert_int_equal(resp.n_warnings, 1);
        assert_string_equal(resp.warnings[0],
                            "spec.template.spec.nodeReuse: a host comes back only when its old "
                            "Machine is gone before the new one is created; set maxSurge: 0 in "
                            "the rollout strategy of each MachineDeployment and "
                            "KubeadmControlPlane using this template "
                            "(spec.rollout.strategy.rollingUpdate; v1beta1: spec.strategy / "
                            "spec.rolloutStrategy)");
        admission_response_release(&resp);
        /* no warning without reuse, nor on each MaasMachine made from the template */
        assert_int_equal(assert_allowed(SCHEMA_KIND_MACHINE_TEMPLATE, ",\"nodeReuse\":false"), 0);
        assert_int_equal(assert_allowed(SCHEMA_KIND_MACHINE, ",\"nodeReuse\":true"), 0);
}

static void test_reuse__fields_survive_the_codec(void **state)
{
        cJSON *o = object(SCHEMA_KIND_MACHINE, ",\"nodeReuse\":true,\"release\":{\"erase\":"
                                               "\"none\"}");
        struct maas_machine m;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_machine_decode(o, &m, NULL), 0);
        assert_true(m.spec.node_reuse);
        assert_true(m.spec.has_node_reuse);
        assert_non_null(m.spec.release);
        assert_string_equal(m.spec.release->erase, "none");
        assert_int_equal(maas_machine_encode(&m, &out), 0);
        assert_true(cJSON_IsTrue(json_find(out, "spec", "nodeReuse", NULL)));
        assert_string_equal(json_find_str(out, "spec", "release", "erase", NULL), "none");
        cJSON_Delete(out);
        maas_machine_release(&m);
        cJSON_Delete(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_reuse__unknown_erase_denied_naming_the_field),
                cmocka_unit_test(test_reuse__secure_erase_with_node_reuse_denied),
                cmocka_unit_test(test_reuse__reusing_template_warns_about_surge),
                cmocka_unit_test(test_reuse__fields_survive_the_codec),
        };

        xalloc_install_cjson_hooks();
        return cmocka_run_group_tests_name("reuse_admission", tests, NULL, NULL);
}
