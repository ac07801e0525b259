/*
 * Admission of the deploy and allocation options (issue #21 item 2, docs/deploy-options.md):
 * each invalid value is denied with an error naming its field, in a MaasMachine and in a
 * MaasMachineTemplate (spec.template.spec); a MaasMachine update may not change them.
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
#include "testutil.h"
#include "xalloc.h"

#define HEAD                                                                           \
        "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"%s\"," \
        "\"metadata\":{\"name\":\"x\",\"namespace\":\"ns1\"},\"spec\":%s}"
#define BASE "\"image\":\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096"

static cJSON *object(const char *kind, const char *extra, bool tmpl)
{
        char *spec = xasprintf("{" BASE "%s}", extra);
        char *body = tmpl ? xasprintf("{\"template\":{\"spec\":%s}}", spec) : xstrdup(spec);
        char *doc = xasprintf(HEAD, kind, body);
        cJSON *o = cJSON_Parse(doc);

        assert_non_null(o);
        free(doc);
        free(body);
        free(spec);
        return o;
}

/* want NULL = allowed; else the denial's only error, its leading "%s" the spec's path. */
static void expect(const char *extra, const char *want, bool tmpl)
{
        const char *kind = tmpl ? "MaasMachineTemplate" : "MaasMachine";
        struct admission_request req = { .op = ADMISSION_OP_CREATE,
                                         .object = object(kind, extra, tmpl) };
        struct admission_response resp = { 0 };
        char *err, *msg;

        webhook_validate(kind, &req, &resp);
        if (!want) {
                if (!resp.allowed)
                        fail_msg("%s denied: %s", extra, resp.message);
        } else {
                err = xasprintf("%s%s", tmpl ? "spec.template.spec" : "spec", want + 2);
                msg = xasprintf("%s.infrastructure.cluster.x-k8s.io \"x\" is invalid: %s", kind,
                                err);
                if (resp.allowed)
                        fail_msg("%s allowed, want %s", extra, err);
                assert_int_equal(resp.code, 422);
                assert_string_equal(resp.message, msg);
                free(msg);
                free(err);
        }
        admission_response_release(&resp);
        cJSON_Delete(req.object);
}

#define SL(body) ",\"storageLayout\":{" body "}"

static void test_deploy_options__invalid_values_are_denied_naming_the_field(void **state)
{
        static const char *const rows[][2] = {
                { ",\"hweKernel\":\"ga-22.04\",\"architecture\":\"amd64/generic\","
                  "\"excludeTags\":[\"gpu\"],\"minDiskSize\":100,\"deployInMemory\":true",
                  NULL },
                { ",\"hweKernel\":\"hwe-22.04-lowlatency\",\"architecture\":\"arm64\"", NULL },
                { SL("\"type\":\"lvm\",\"rootSize\":\"40G\",\"vgName\":\"vg0\",\"lvName\":\"root\","
                     "\"lvSize\":\"90%\",\"bootSize\":\"1G\""),
                  NULL },
                { SL("\"type\":\"bcache\",\"cacheMode\":\"writeback\",\"cacheSize\":\"48G\","
                     "\"cacheNoPart\":false"),
                  NULL },
                { SL("\"type\":\"flat\""), NULL },
                { SL("\"type\":\"blank\""), NULL },
                { ",\"hweKernel\":\"generic\"",
                  "%s.hweKernel: Invalid value: \"generic\": must be a MAAS kernel name with a ga "
                  "or hwe part (e.g. ga-22.04, hwe-22.04, hwe-22.04-lowlatency); MAAS ignores any "
                  "other" },
                { ",\"hweKernel\":\"HWE-22.04\"",
                  "%s.hweKernel: Invalid value: \"HWE-22.04\": must be a MAAS kernel name with a "
                  "ga or hwe part (e.g. ga-22.04, hwe-22.04, hwe-22.04-lowlatency); MAAS ignores "
                  "any other" },
                { ",\"architecture\":\"x86 64\"",
                  "%s.architecture: Invalid value: \"x86 64\": must be a MAAS architecture: "
                  "<arch> or <arch>/<subarch> (e.g. amd64, arm64/generic)" },
                { ",\"architecture\":\"amd64/\"",
                  "%s.architecture: Invalid value: \"amd64/\": must be a MAAS architecture: "
                  "<arch> or <arch>/<subarch> (e.g. amd64, arm64/generic)" },
                { ",\"excludeTags\":[\"a b\"]",
                  "%s.excludeTags[0]: Invalid value: \"a b\": must be a MAAS name: letters, "
                  "digits, '-' and '_' only" },
                { ",\"tags\":[\"ssd\"],\"excludeTags\":[\"ssd\"]",
                  "%s.excludeTags[0]: Invalid value: \"ssd\": is also in tags: no machine can "
                  "both carry and lack it" },
                { ",\"minDiskSize\":-1",
                  "%s.minDiskSize: Invalid value: -1: must be greater than or equal to 0" },
                { SL("\"rootSize\":\"40G\""), "%s.storageLayout.type: Required value" },
                { SL("\"type\":\"zfs\""),
                  "%s.storageLayout.type: Unsupported value: \"zfs\": supported values: "
                  "\"flat\", \"lvm\", \"bcache\", \"blank\"" },
                { SL("\"type\":\"flat\",\"vgName\":\"vg0\""),
                  "%s.storageLayout.vgName: Forbidden: only with type lvm: the flat layout does "
                  "not take it" },
                { SL("\"type\":\"lvm\",\"cacheMode\":\"writeback\""),
                  "%s.storageLayout.cacheMode: Forbidden: only with type bcache: the lvm layout "
                  "does not take it" },
                { SL("\"type\":\"blank\",\"rootSize\":\"40G\""),
                  "%s.storageLayout.rootSize: Forbidden: a partition size: the blank layout does "
                  "not take it" },
                { SL("\"type\":\"lvm\",\"rootSize\":\"lots\""),
                  "%s.storageLayout.rootSize: Invalid value: \"lots\": must be a size in bytes "
                  "with an optional K, M, G, T, P or E suffix (powers of 1000), or a percentage "
                  "such as 50%" },
                { SL("\"type\":\"lvm\",\"rootSize\":\"2G\""),
                  "%s.storageLayout.rootSize: Invalid value: \"2G\": must be at least "
                  "3221225472 bytes (MAAS's minimum)" },
                { SL("\"type\":\"flat\",\"bootSize\":\"512M\""),
                  "%s.storageLayout.bootSize: Invalid value: \"512M\": must be at least "
                  "536870912 bytes (MAAS's minimum)" },
                { SL("\"type\":\"lvm\",\"lvSize\":\"150%\""),
                  "%s.storageLayout.lvSize: Invalid value: \"150%\": a percentage must be above "
                  "0% and at most 100%" },
                { SL("\"type\":\"lvm\",\"vgName\":\"-vg\""),
                  "%s.storageLayout.vgName: Invalid value: \"-vg\": must be an LVM name: letters, "
                  "digits and +_.- , not starting with -, at most 127 characters" },
                { SL("\"type\":\"bcache\",\"cacheMode\":\"writefast\""),
                  "%s.storageLayout.cacheMode: Unsupported value: \"writefast\": supported "
                  "values: \"writeback\", \"writethrough\", \"writearound\"" },
                { ",\"parent\":\"abc123\"",
                  "%s.parent: Forbidden: only for an LXD VM (lxd.enabled): a bare-metal machine "
                  "has no parent host" },
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                expect(rows[i][0], rows[i][1], false);
                expect(rows[i][0], rows[i][1], true);
        }
}

/* A MaasMachine UPDATE from old to cur extras: denied naming field, or allowed (NULL). */
static void expect_update(const char *old, const char *cur, const char *field)
{
        struct admission_request req = { .op = ADMISSION_OP_UPDATE,
                                         .object = object("MaasMachine", cur, false),
                                         .old_object = object("MaasMachine", old, false) };
        struct admission_response resp = { 0 };
        char *want;

        webhook_validate("MaasMachine", &req, &resp);
        if (!field) {
                assert_true(resp.allowed);
        } else {
                want = xasprintf("MaasMachine.infrastructure.cluster.x-k8s.io \"x\" is invalid: "
                                 "%s: Invalid value: field is immutable: MAAS applied it when the "
                                 "machine was allocated or deployed",
                                 field);
                assert_false(resp.allowed);
                assert_string_equal(resp.message, want);
                free(want);
        }
        admission_response_release(&resp);
        cJSON_Delete(req.object);
        cJSON_Delete(req.old_object);
}

static void test_deploy_options__a_machine_keeps_its_options(void **state)
{
        (void)state;
        expect_update(",\"hweKernel\":\"ga-22.04\"", ",\"hweKernel\":\"ga-20.04\"",
                      "spec.hweKernel");
        expect_update("", ",\"architecture\":\"arm64\"", "spec.architecture");
        expect_update(",\"excludeTags\":[\"gpu\"]", "", "spec.excludeTags");
        expect_update(",\"minDiskSize\":100", ",\"minDiskSize\":200", "spec.minDiskSize");
        expect_update(SL("\"type\":\"lvm\""), SL("\"type\":\"lvm\",\"rootSize\":\"40G\""),
                      "spec.storageLayout");
        expect_update(",\"deployInMemory\":false", ",\"deployInMemory\":true",
                      "spec.deployInMemory");
        /* the same values, spelled as the API server stores them, change nothing */
        expect_update(",\"deployInMemory\":false,\"minDiskSize\":0", "", NULL);
        expect_update(SL("\"type\":\"flat\",\"rootSize\":\"40G\"") ",\"hweKernel\":\"ga-22.04\"",
                      SL("\"type\":\"flat\",\"rootSize\":\"40G\"") ",\"hweKernel\":\"ga-22.04\"",
                      NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_deploy_options__invalid_values_are_denied_naming_the_field),
                cmocka_unit_test(test_deploy_options__a_machine_keeps_its_options),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
