/*
 * The pure parts of the webhooks: Kubernetes field-error rendering and aggregation, the
 * single-field rules, the reference's immutability messages and the defaulting patches;
 * and updates of objects as the reference provider wrote them (tests/fixtures/reference):
 * one that only changes metadata is never denied nor defaulted, a real spec change still is
 * judged.
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

#include "../../../webhooks/field_errors.h"
#include "../../../webhooks/validate.h"
#include "../../../webhooks/validate_rules.h"
#include "../../../webhooks/webhook_kinds.h"
#include "admission.h"
#include "err.h"
#include "json.h"
#include "maas_inventory.h"
#include "testutil.h"
#include "xalloc.h"

static void assert_only_error(struct field_errors *fe, const char *text)
{
        char *t;

        assert_int_equal(fe->n, 1);
        t = field_error_text(&fe->items[0]);
        assert_string_equal(t, text);
        free(t);
        field_errors_release(fe);
}

static void test_validate__quote_matches_go_percent_q(void **state)
{
        static const char *const cases[][2] = {
                { "plain", "\"plain\"" },
                { "a\"b\\c", "\"a\\\"b\\\\c\"" },
                { "tab\there\n", "\"tab\\there\\n\"" },
                { "\x01\x7f", "\"\\x01\\x7f\"" },
                { "", "\"\"" },
                { "zoné", "\"zoné\"" },
        };

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char *q = field_quote(cases[i][0]);

                assert_string_equal(q, cases[i][1]);
                free(q);
        }
}

static void test_validate__error_text_shows_value_only_where_kubernetes_does(void **state)
{
        struct field_errors fe;
        static const char *const want[] = {
                "spec.a: Invalid value: -1: must be greater than or equal to 0",
                "spec.b: Required value",
                "spec.c: Forbidden: no",
                "spec.d: Too long: may not be more than 3 bytes",
                "spec.e: Duplicate value: \"x\"",
                "spec.f: Invalid value: expected integer, got string",
        };

        (void)state;
        field_errors_init(&fe);
        field_invalid_int(&fe, "spec.a", -1, "must be greater than or equal to %d", 0);
        field_required(&fe, "spec.b");
        field_errors_add(&fe, FIELD_ERR_FORBIDDEN, "spec.c", "\"hidden\"", "no");
        field_errors_add(&fe, FIELD_ERR_TOO_LONG, "spec.d", "\"abcd\"",
                         "may not be more than 3 bytes");
        field_errors_add(&fe, FIELD_ERR_DUPLICATE, "spec.e", "\"x\"", NULL);
        field_errors_add(&fe, FIELD_ERR_TYPE_INVALID, "spec.f", NULL,
                         "expected integer, got string");
        assert_int_equal(fe.n, 6);
        for (size_t i = 0; i < fe.n; i++)
                assert_true(field_errors_contains(&fe, want[i]));
        field_errors_release(&fe);
}

static void test_validate__deny_aggregates_like_new_invalid(void **state)
{
        struct admission_response resp = { .allowed = true };
        struct field_errors fe;

        (void)state;
        field_errors_init(&fe);
        field_required(&fe, "spec.image");
        field_errors_deny(&fe, "g.io", "K", "n", &resp);
        assert_false(resp.allowed);
        assert_int_equal(resp.code, 422);
        assert_string_equal(resp.reason, "Invalid");
        assert_string_equal(resp.message, "K.g.io \"n\" is invalid: spec.image: Required value");
        /* the same error twice is printed once (and then without brackets), as Go's
         * aggregate does; causes keep both */
        field_required(&fe, "spec.image");
        field_errors_deny(&fe, "g.io", "K", "n", &resp);
        assert_string_equal(resp.message, "K.g.io \"n\" is invalid: spec.image: Required value");
        assert_int_equal(cJSON_GetArraySize(resp.causes), 2);
        field_required(&fe, "spec.minCPU");
        field_errors_deny(&fe, "g.io", "K", "n", &resp);
        assert_string_equal(resp.message, "K.g.io \"n\" is invalid: [spec.image: Required value, "
                                          "spec.minCPU: Required value]");
        field_errors_release(&fe);
        admission_response_release(&resp);
}

static void test_validate__subtract_drops_errors_the_old_object_had(void **state)
{
        struct field_errors cur;
        struct field_errors old;

        (void)state;
        field_errors_init(&cur);
        field_errors_init(&old);
        field_required(&cur, "spec.a");
        field_required(&cur, "spec.b");
        field_required(&cur, "spec.c");
        field_required(&old, "spec.b");
        field_errors_subtract(&cur, &old);
        assert_int_equal(cur.n, 2);
        assert_true(field_errors_contains(&cur, "spec.a: Required value"));
        assert_true(field_errors_contains(&cur, "spec.c: Required value"));
        field_errors_release(&cur);
        field_errors_release(&old);
}

static void test_validate__errors_beyond_the_cap_are_counted(void **state)
{
        struct field_errors fe;

        (void)state;
        field_errors_init(&fe);
        for (int i = 0; i < FIELD_ERRORS_MAX + 3; i++)
                field_invalid_int(&fe, "spec.x", i, "bad");
        assert_int_equal(fe.n, FIELD_ERRORS_MAX);
        assert_int_equal(fe.dropped, 3);
        field_errors_release(&fe);
}

#define OSYSTEMS "caringo, centos, custom, esxi, ol, rhel, suse, ubuntu, ubuntu-core, windows"

static void test_validate__image_rules(void **state)
{
        static const char *const good[] = { "ubuntu/jammy",    "jammy",  "custom/a.b_c-1",
                                            "windows/win2019", "ol/8.8", "ubuntu-core/22",
                                            "custom/Z9" };
        static const char *const bad[][2] = {
                { "", "i: Required value" },
                { "/x", "i: Invalid value: \"/x\": must not start with '/'" },
                { "x/", "i: Invalid value: \"x/\": must not end with '/'" },
                { "a/b/c", "i: Invalid value: \"a/b/c\": must contain at most one '/' "
                           "(<osystem>/<release> or a bare <release>)" },
                { "ubuntu/j$", "i: Invalid value: \"ubuntu/j$\": must contain only letters, "
                               "digits, '.', '-', '_' and one '/'" },
                { "ubuntu-cor/22", "i: Invalid value: \"ubuntu-cor/22\": unknown operating "
                                   "system \"ubuntu-cor\" (known: " OSYSTEMS ")" },
                { "ubuntuu/jammy", "i: Invalid value: \"ubuntuu/jammy\": unknown operating "
                                   "system \"ubuntuu\" (known: " OSYSTEMS ")" },
                { "Ubuntu/jammy", "i: Invalid value: \"Ubuntu/jammy\": unknown operating "
                                  "system \"Ubuntu\" (known: " OSYSTEMS ")" },
        };
        struct field_errors fe;

        (void)state;
        field_errors_init(&fe);
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                rule_image(&fe, "i", good[i]);
        assert_int_equal(fe.n, 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                rule_image(&fe, "i", bad[i][0]);
                assert_only_error(&fe, bad[i][1]);
        }
        rule_image(&fe, "i", NULL);
        assert_only_error(&fe, "i: Required value");
        assert_false(rule_osystem_known("debian"));
        assert_true(rule_osystem_known("esxi"));
}

static void test_validate__image_length_is_capped(void **state)
{
        char long_image[RULE_IMAGE_MAX + 2];
        struct field_errors fe;

        (void)state;
        memset(long_image, 'a', sizeof(long_image) - 1);
        long_image[sizeof(long_image) - 1] = '\0';
        field_errors_init(&fe);
        rule_image(&fe, "i", long_image);
        assert_only_error(&fe, "i: Too long: may not be more than 255 bytes");
        long_image[RULE_IMAGE_MAX] = '\0';
        rule_image(&fe, "i", long_image);
        assert_int_equal(fe.n, 0);
}

static void test_validate__dns_names_and_hosts(void **state)
{
        static const char *const good[] = { "maas", "maas.sc", "a-1.b2.example", "x" };
        static const char *const bad[] = { "", "Maas", "-a", "a-", "a..b", "a.", ".a", "a_b" };
        char label[70];
        struct field_errors fe;

        (void)state;
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                assert_true(rule_is_dns_name(good[i]));
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_false(rule_is_dns_name(bad[i]));
        memset(label, 'a', 64);
        label[64] = '\0';
        assert_false(rule_is_dns_name(label));
        label[63] = '\0';
        assert_true(rule_is_dns_name(label));
        field_errors_init(&fe);
        rule_host(&fe, "h", "10.1.2.3");
        rule_host(&fe, "h", "::1");
        rule_host(&fe, "h", "api.maas");
        assert_int_equal(fe.n, 0);
        rule_host(&fe, "h", "10.1.2.3:6443");
        assert_int_equal(fe.n, 1);
        field_errors_release(&fe);
        rule_port(&fe, "p", 0);
        rule_port(&fe, "p", 65536);
        rule_port(&fe, "p", 1);
        rule_port(&fe, "p", 65535);
        assert_int_equal(fe.n, 2);
        field_errors_release(&fe);
}

static void test_validate__maas_names_and_provider_ids(void **state)
{
        struct schema_strv tags = { 0 };
        struct field_errors fe;

        (void)state;
        field_errors_init(&fe);
        rule_maas_name(&fe, "n", NULL);
        rule_maas_name(&fe, "n", "default");
        rule_maas_name(&fe, "n", "zone_1-a");
        rule_provider_id(&fe, "p", NULL);
        rule_provider_id(&fe, "p", "maas:///z/abc");
        rule_provider_id(&fe, "p", "maas:////abc");
        assert_int_equal(fe.n, 0);
        rule_provider_id(&fe, "p", "maas:///z/");
        rule_provider_id(&fe, "p", "maas:///a/b/c");
        rule_provider_id(&fe, "p", "aws:///z/abc");
        assert_int_equal(fe.n, 3);
        field_errors_release(&fe);
        schema_strv_add(&tags, "a");
        schema_strv_add(&tags, "b");
        schema_strv_add(&tags, "a");
        schema_strv_add(&tags, "a");
        rule_maas_names(&fe, "spec.tags", &tags);
        assert_int_equal(fe.n, 2);
        assert_true(field_errors_contains(&fe, "spec.tags[2]: Duplicate value: \"a\""));
        assert_true(field_errors_contains(&fe, "spec.tags[3]: Duplicate value: \"a\""));
        field_errors_release(&fe);
        schema_strv_release(&tags);
}

static void test_validate__immutability_messages_in_reference_order(void **state)
{
        static char a[] = "a";
        static char b[] = "b";
        struct maas_machine_spec old = { .image = a,
                                         .min_cpu = 1,
                                         .has_min_cpu = true,
                                         .min_memory = 10,
                                         .has_min_memory = true };
        struct maas_machine_spec cur = old;
        char *msg;

        (void)state;
        assert_null(machine_spec_immutable(&old, &cur, "machine"));
        cur.min_memory = 11;
        msg = machine_spec_immutable(&old, &cur, "machine");
        assert_string_equal(msg, "maas machine min memory change is not allowed, old=10 MB, "
                                 "new=11 MB");
        free(msg);
        cur.min_cpu = 2;
        msg = machine_spec_immutable(&old, &cur, "machine template");
        assert_string_equal(msg, "maas machine template min cpu count change is not allowed, "
                                 "old=1, new=2");
        free(msg);
        cur.image = b;
        msg = machine_spec_immutable(&old, &cur, "machine");
        assert_string_equal(msg, "maas machine image change is not allowed, old=a, new=b");
        free(msg);
        /* an absent value (the reference would crash) is left to the required-field rule */
        cur = old;
        cur.has_min_cpu = false;
        cur.min_cpu = 0;
        assert_null(machine_spec_immutable(&old, &cur, "machine"));
}

static void check_patch(void (*fn)(const cJSON *, const char *, cJSON *),
                        const char *spec,
                        const char *want)
{
        cJSON *s = cJSON_Parse(spec);
        cJSON *patch = cJSON_CreateArray();
        char *got;

        fn(s, "/spec", patch);
        got = cJSON_PrintUnformatted(patch);
        assert_string_equal(got, want);
        free(got);
        cJSON_Delete(patch);
        cJSON_Delete(s);
}

static void test_validate__defaulting_patches(void **state)
{
        (void)state;
        check_patch(defaults_machine_spec, "{\"tags\":[\"a\",\"b\",\"a\"]}",
                    "[{\"op\":\"replace\",\"path\":\"/spec/tags\",\"value\":[\"a\",\"b\"]}]");
        check_patch(defaults_machine_spec, "{\"tags\":[\"a\",\"b\"]}", "[]");
        check_patch(defaults_machine_spec, "{\"tags\":[\"a\",1,\"a\"]}", "[]");
        check_patch(defaults_machine_spec, "{}", "[]");
        check_patch(defaults_cluster_spec, "{\"controlPlaneEndpoint\":{\"host\":\"h\"}}",
                    "[{\"op\":\"add\",\"path\":\"/spec/controlPlaneEndpoint/port\","
                    "\"value\":6443}]");
        check_patch(defaults_cluster_spec,
                    "{\"controlPlaneEndpoint\":{\"host\":\"h\",\"port\":null}}",
                    "[{\"op\":\"add\",\"path\":\"/spec/controlPlaneEndpoint/port\","
                    "\"value\":6443}]");
        check_patch(defaults_cluster_spec,
                    "{\"controlPlaneEndpoint\":{\"host\":\"h\",\"port\":\"x\"}}", "[]");
        check_patch(defaults_cluster_spec, "{\"controlPlaneEndpoint\":{\"port\":0}}", "[]");
        check_patch(defaults_cluster_spec, "{\"controlPlaneEndpoint\":7}", "[]");
}

static void test_validate__kinds_are_found_by_name(void **state)
{
        (void)state;
        assert_string_equal(kind_ops_find("MaasMachine")->kind, "MaasMachine");
        assert_ptr_equal(kind_ops_find("MaasMachine")->spec, &spec_ops_machine);
        assert_string_equal(kind_ops_find("MaasClusterTemplate")->kind, "MaasClusterTemplate");
        assert_true(kind_ops_find("MaasClusterTemplate")->is_template);
        assert_null(kind_ops_find("Pod"));
}

/* ---- updates of the reference provider's objects ---- */

static char no_name[] = "";

/* A member of obj by a path of member names (NULL-terminated), or NULL. */
static cJSON *member(cJSON *obj, ...)
{
        const char *key;
        va_list ap;

        va_start(ap, obj);
        while (obj && (key = va_arg(ap, const char *)))
                obj = cJSON_GetObjectItemCaseSensitive(obj, key);
        va_end(ap);
        return obj;
}

/* Validation of the UPDATE of the stored object old to cur (both borrowed), and the
 * mutating webhook's answer for it. */
static void review(cJSON *old,
                   cJSON *cur,
                   struct admission_response *v,
                   struct admission_response *m)
{
        const char *kind = json_find_str(cur, "kind", NULL);
        struct admission_request req = {
                .op = ADMISSION_OP_UPDATE, .name = no_name, .object = cur, .old_object = old
        };

        assert_non_null(kind);
        webhook_validate(kind, &req, v);
        webhook_default(kind, &req, m);
}

/* The update kubectl or capmaas sends to remove the finalizer of a deleting object: the same
 * object, with deletionTimestamp and without finalizers. */
static cJSON *without_finalizers(const cJSON *stored)
{
        cJSON *cur = cJSON_Duplicate(stored, true);
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(cur, "metadata");

        cJSON_DeleteItemFromObjectCaseSensitive(meta, "finalizers");
        cJSON_AddStringToObject(meta, "deletionTimestamp", "2026-07-02T10:00:00Z");
        return cur;
}

static void test_validate__reference_objects_may_always_lose_their_finalizer(void **state)
{
        static const char *const fixtures[] = {
                "v0.7-maascluster.json", "v0.7-maasmachine.json", "v0.7-maasmachinetemplate.json",
                "v0.8-maascluster.json", "v0.8-maasmachine.json", "v0.8-maasmachinetemplate.json",
                "head-maascluster.json", "head-maasmachine.json",
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(fixtures); i++) {
                cJSON *old = test_fixture_json("reference/%s", fixtures[i]);
                cJSON *cur = without_finalizers(old);
                struct admission_response v = { 0 };
                struct admission_response m = { 0 };

                print_message("%s\n", fixtures[i]);
                review(old, cur, &v, &m);
                if (!v.allowed)
                        print_error("denied: %s\n", v.message);
                assert_true(v.allowed);
                assert_true(m.allowed);
                assert_null(m.patch); /* the spec is left as stored */
                admission_response_release(&v);
                admission_response_release(&m);
                cJSON_Delete(cur);
                cJSON_Delete(old);
        }
}

/* The v0.7 template's duplicate tags would be defaulted away on a spec change; a label
 * added to it changes nothing in its spec, so there is no patch (which would make the
 * spec.template.spec differ from the stored one: denied as immutable). */
static void test_validate__metadata_only_update_is_not_defaulted(void **state)
{
        cJSON *old = test_fixture_json("reference/v0.7-maasmachinetemplate.json");
        cJSON *cur = cJSON_Duplicate(old, true);
        struct admission_response v = { 0 };
        struct admission_response m = { 0 };
        struct admission_request create = { .op = ADMISSION_OP_CREATE,
                                            .name = no_name,
                                            .object = cur };

        (void)state;
        json_set_string(json_child_object(member(cur, "metadata", NULL), "labels", NULL), "team",
                        "infra");
        review(old, cur, &v, &m);
        assert_true(v.allowed);
        assert_null(m.patch);
        admission_response_release(&m);
        /* the same spec on CREATE is defaulted */
        webhook_default("MaasMachineTemplate", &create, &m);
        assert_non_null(m.patch);
        assert_int_equal(cJSON_GetArraySize(m.patch), 1);
        admission_response_release(&v);
        admission_response_release(&m);
        cJSON_Delete(cur);
        cJSON_Delete(old);
}

/* A stored spec that today's rules reject (the providerID with two slashes of the
 * reference's doc comment; a member of a shape nothing decodes) does not block an update
 * that leaves it as it is. */
static void test_validate__unchanged_legacy_spec_is_not_judged(void **state)
{
        cJSON *old = test_fixture_json("reference/v0.7-maasmachine.json");
        cJSON *cur;
        struct admission_response v = { 0 };
        struct admission_response m = { 0 };

        (void)state;
        json_set_string(member(old, "spec", NULL), "providerID", "maas://az2/eccapw");
        json_set_string(member(old, "spec", NULL), "tags", "ssd");
        cur = without_finalizers(old);
        review(old, cur, &v, &m);
        if (!v.allowed)
                print_error("denied: %s\n", v.message);
        assert_true(v.allowed);
        assert_null(m.patch);
        admission_response_release(&v);
        admission_response_release(&m);
        cJSON_Delete(cur);
        cJSON_Delete(old);
}

/* A real spec change of a reference object is still judged: the reference's rules answer
 * with its message. */
static void test_validate__spec_change_of_reference_object_is_judged(void **state)
{
        cJSON *mm = test_fixture_json("reference/v0.7-maasmachine.json");
        cJSON *mc = test_fixture_json("reference/v0.7-maascluster.json");
        cJSON *mm2 = cJSON_Duplicate(mm, true);
        cJSON *mc2 = cJSON_Duplicate(mc, true);
        struct admission_response v = { 0 };
        struct admission_response m = { 0 };

        (void)state;
        json_set_int64(member(mm2, "spec", NULL), "minCPU", 8);
        review(mm, mm2, &v, &m);
        assert_false(v.allowed);
        assert_int_equal(v.code, 403);
        assert_string_equal(v.message,
                            "maas machine min cpu count change is not allowed, old=4, new=8");
        admission_response_release(&v);
        admission_response_release(&m);

        json_set_string(member(mc2, "spec", NULL), "dnsDomain", "other");
        review(mc, mc2, &v, &m);
        assert_false(v.allowed);
        assert_string_equal(v.message, "changing cluster DNS Domain not allowed");
        admission_response_release(&v);
        admission_response_release(&m);
        cJSON_Delete(mm2);
        cJSON_Delete(mc2);
        cJSON_Delete(mm);
        cJSON_Delete(mc);
}

#define MC_DOC                                                                                     \
        "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"MaasCluster\","    \
        "\"metadata\":{\"name\":\"c1\",\"namespace\":\"ns1\"},\"spec\":{\"dnsDomain\":\"maas\"%s}" \
        "}"

static void validate_create(const char *doc, struct admission_response *v)
{
        struct admission_request req = { .op = ADMISSION_OP_CREATE, .object = cJSON_Parse(doc) };

        assert_non_null(req.object);
        *v = (struct admission_response){ .allowed = true };
        webhook_validate("MaasCluster", &req, v);
        cJSON_Delete(req.object);
}

/* spec.identityRef (docs/credentials.md): a Secret, named as Secrets are; once set it stays,
 * since the cluster's machines live in the MAAS it names. */
static void test_validate__identity_ref_is_a_secret_and_immutable(void **state)
{
        char *good =
                xasprintf(MC_DOC, ",\"identityRef\":{\"kind\":\"Secret\",\"name\":\"maas-b\"}");
        char *kind = xasprintf(MC_DOC, ",\"identityRef\":{\"kind\":\"ConfigMap\",\"name\":\"x\"}");
        char *name =
                xasprintf(MC_DOC, ",\"identityRef\":{\"kind\":\"Secret\",\"name\":\"Bad_Name\"}");
        char *other =
                xasprintf(MC_DOC, ",\"identityRef\":{\"kind\":\"Secret\",\"name\":\"maas-c\"}");
        char *none = xasprintf(MC_DOC, "");
        struct admission_response v;
        struct admission_request req = { .op = ADMISSION_OP_UPDATE };

        (void)state;
        validate_create(good, &v);
        assert_true(v.allowed);
        admission_response_release(&v);
        validate_create(kind, &v);
        assert_false(v.allowed);
        assert_non_null(
                strstr(v.message, "spec.identityRef.kind: Unsupported value: \"ConfigMap\""));
        admission_response_release(&v);
        validate_create(name, &v);
        assert_false(v.allowed);
        assert_non_null(strstr(v.message, "spec.identityRef.name: Invalid value: \"Bad_Name\""));
        admission_response_release(&v);

        const char *pairs[][2] = { { good, other }, { none, good }, { good, none } };

        for (size_t i = 0; i < 3; i++) {
                req.old_object = cJSON_Parse(pairs[i][0]);
                req.object = cJSON_Parse(pairs[i][1]);
                v = (struct admission_response){ .allowed = true };
                webhook_validate("MaasCluster", &req, &v);
                assert_false(v.allowed);
                assert_non_null(strstr(v.message, "changing spec.identityRef not allowed"));
                admission_response_release(&v);
                cJSON_Delete(req.object);
                cJSON_Delete(req.old_object);
        }
        free(good);
        free(kind);
        free(name);
        free(other);
        free(none);
}

/* Status is not the webhook's: a spec change is judged on its spec even when the stored
 * status (kept by the API server) has a shape nothing decodes. */
static void test_validate__status_never_denies(void **state)
{
        cJSON *old = test_fixture_json("reference/v0.7-maascluster.json");
        cJSON *cur;
        struct admission_response v = { 0 };
        struct admission_response m = { 0 };

        (void)state;
        json_set_string(member(old, "status", NULL), "failureDomains", "az1");
        json_set_string(member(old, "status", NULL), "ready", "yes");
        cur = cJSON_Duplicate(old, true);
        cJSON_AddItemToArray(member(cur, "spec", "failureDomains", NULL),
                             cJSON_CreateString("az3"));
        review(old, cur, &v, &m);
        if (!v.allowed)
                print_error("denied: %s\n", v.message);
        assert_true(v.allowed);
        admission_response_release(&v);
        admission_response_release(&m);
        /* a type error in the spec still denies, naming the field */
        json_set_string(member(cur, "spec", NULL), "dnsDomain", "maas");
        cJSON_ReplaceItemInObjectCaseSensitive(member(cur, "spec", NULL), "failureDomains",
                                               cJSON_CreateString("az1"));
        review(old, cur, &v, &m);
        assert_false(v.allowed);
        assert_int_equal(v.code, 422);
        assert_non_null(strstr(v.message, "spec.failureDomains"));
        assert_null(strstr(v.message, "status"));
        admission_response_release(&v);
        admission_response_release(&m);
        cJSON_Delete(cur);
        cJSON_Delete(old);
}

/* An UPDATE review of MaasMachine m1 from old_json to cur_json, through the whole flow. */
static void review_update(const char *old_json,
                          const char *cur_json,
                          struct admission_response *resp)
{
        struct admission_request req = { .op = ADMISSION_OP_UPDATE,
                                         .object = cJSON_Parse(cur_json),
                                         .old_object = cJSON_Parse(old_json) };

        assert_non_null(req.object);
        assert_non_null(req.old_object);
        *resp = (struct admission_response){ 0 };
        webhook_validate("MaasMachine", &req, resp);
        cJSON_Delete(req.object);
        cJSON_Delete(req.old_object);
}

#define MM_HEAD                                                                                 \
        "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"MaasMachine\"," \
        "\"metadata\":{\"name\":\"m1\",\"namespace\":\"ns1\"%s},\"spec\":{\"image\":"           \
        "\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096%s}%s}"

static char *mm_doc(const char *meta, const char *provider_id, const char *status)
{
        char ids[128] = "";

        if (provider_id)
                (void)snprintf(ids, sizeof(ids), ",\"providerID\":\"%s\"", provider_id);
        return xasprintf(MM_HEAD, meta, ids, status);
}

/* Once provisioned the providerID is Cluster API's: a change or removal is denied, naming
 * the field; before provisioning capmaas's own replacement of the host is allowed, and an
 * object being deleted is left to its finalizer. */
static void test_validate__provider_id_immutable_once_provisioned(void **state)
{
        static const char *const provisioned[] = {
                ",\"status\":{\"ready\":true}",
                ",\"status\":{\"ready\":false,\"initialization\":{\"provisioned\":true}}",
        };
        struct admission_response resp;
        char *old, *cur;

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(provisioned); i++) {
                old = mm_doc("", "maas:///az1/abc123", provisioned[i]);
                cur = mm_doc("", "maas:///az1/def456", provisioned[i]);
                review_update(old, cur, &resp);
                assert_false(resp.allowed);
                assert_int_equal(resp.code, 422);
                assert_non_null(strstr(resp.message, "spec.providerID: Invalid value: "
                                                     "\"maas:///az1/def456\": field is immutable "
                                                     "once the machine is provisioned"));
                admission_response_release(&resp);
                free(cur);
                cur = mm_doc("", NULL, provisioned[i]);
                review_update(old, cur, &resp);
                assert_false(resp.allowed);
                assert_non_null(strstr(resp.message, "spec.providerID: Forbidden"));
                admission_response_release(&resp);
                free(cur);
                /* unchanged: allowed */
                review_update(old, old, &resp);
                assert_true(resp.allowed);
                admission_response_release(&resp);
                free(old);
        }
        /* before provisioning: capmaas replaces a failed deploy's host */
        old = mm_doc("", "maas:///az1/abc123", ",\"status\":{\"ready\":false}");
        cur = mm_doc("", "maas:///az1/def456", ",\"status\":{\"ready\":false}");
        review_update(old, cur, &resp);
        assert_true(resp.allowed);
        admission_response_release(&resp);
        free(cur);
        cur = mm_doc("", NULL, ",\"status\":{\"ready\":false}");
        review_update(old, cur, &resp);
        assert_true(resp.allowed);
        admission_response_release(&resp);
        free(cur);
        free(old);
        /* deleting: allowed */
        old = mm_doc(",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"", "maas:///az1/abc123",
                     ",\"status\":{\"ready\":true}");
        cur = mm_doc(",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"", NULL,
                     ",\"status\":{\"ready\":true}");
        review_update(old, cur, &resp);
        assert_true(resp.allowed);
        admission_response_release(&resp);
        free(cur);
        free(old);
}

/* ---- static addresses (#19): each rule denies naming its field ---- */

#define OBJ_HEAD                                                                       \
        "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"%s\"," \
        "\"metadata\":{\"name\":\"x\",\"namespace\":\"ns1\"},\"spec\":"
#define MM_SPEC "{\"image\":\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096"
#define MC_SPEC "{\"dnsDomain\":\"maas\""

/* A CREATE review of kind with the spec spec_head + extra + "}" (in spec.template.spec when
 * tmpl); want NULL = allowed, else the only error (the denial's whole message). The response
 * is left in resp (caller releases). */
static void expect_create(const char *kind,
                          const char *spec_head,
                          const char *extra,
                          bool tmpl,
                          const char *want,
                          struct admission_response *resp)
{
        char *spec = xasprintf("%s%s}", spec_head, extra);
        char *head = xasprintf(OBJ_HEAD, kind);
        char *doc = tmpl ? xasprintf("%s{\"template\":{\"spec\":%s}}}", head, spec)
                         : xasprintf("%s%s}", head, spec);
        struct admission_request req = { .op = ADMISSION_OP_CREATE, .object = cJSON_Parse(doc) };
        char *msg;

        assert_non_null(req.object);
        *resp = (struct admission_response){ 0 };
        webhook_validate(kind, &req, resp);
        if (!want) {
                if (!resp->allowed)
                        fail_msg("%s denied: %s", extra, resp->message);
        } else {
                msg = xasprintf("%s.infrastructure.cluster.x-k8s.io \"x\" is invalid: %s", kind,
                                want);
                if (resp->allowed)
                        fail_msg("%s allowed, want %s", extra, want);
                assert_int_equal(resp->code, 422);
                assert_string_equal(resp->message, msg);
                free(msg);
        }
        cJSON_Delete(req.object);
        free(doc);
        free(head);
        free(spec);
}

static void expect_machine(const char *extra, const char *want)
{
        struct admission_response resp;

        expect_create("MaasMachine", MM_SPEC, extra, false, want, &resp);
        admission_response_release(&resp);
}

#define SIP(body) ",\"staticIP\":{" body "}"
#define GOOD_SIP  "\"ip\":\"10.10.0.21\",\"cidr\":\"10.10.0.0/24\""

static void test_validate__static_ip_rules_name_the_field(void **state)
{
        static const char *const rows[][2] = {
                { SIP(GOOD_SIP), NULL },
                { SIP(GOOD_SIP ",\"gateway\":\"10.10.0.1\",\"nameservers\":[\"10.10.0.2\","
                               "\"fd00::53\"],\"interface\":\"enp5s0.100\""),
                  NULL },
                { SIP("\"ip\":\"fd00:10::21\",\"cidr\":\"fd00:10::/64\""), NULL },
                { SIP("\"ip\":\"10.10.0.1\",\"cidr\":\"10.10.0.0/31\""), NULL },
                { SIP("\"cidr\":\"10.10.0.0/24\""), "spec.staticIP.ip: Required value" },
                { SIP("\"ip\":\"10.10.0.21\""), "spec.staticIP.cidr: Required value" },
                { SIP("\"ip\":\"ten\",\"cidr\":\"10.10.0.0/24\""),
                  "spec.staticIP.ip: Invalid value: \"ten\": must be an IPv4 or IPv6 address" },
                { SIP("\"ip\":\"10.10.0.21\",\"cidr\":\"10.10.0/24\""),
                  "spec.staticIP.cidr: Invalid value: \"10.10.0/24\": must be a CIDR: an IPv4 or "
                  "IPv6 network and a prefix length (e.g. 10.10.0.0/24)" },
                { SIP("\"ip\":\"10.10.0.21\",\"cidr\":\"10.10.0.21/24\""),
                  "spec.staticIP.cidr: Invalid value: \"10.10.0.21/24\": must be a network "
                  "address: the host bits are set (the network is 10.10.0.0/24)" },
                { SIP("\"ip\":\"10.10.1.21\",\"cidr\":\"10.10.0.0/24\""),
                  "spec.staticIP.ip: Invalid value: \"10.10.1.21\": must be inside "
                  "spec.staticIP.cidr (10.10.0.0/24)" },
                { SIP("\"ip\":\"10.10.0.21\",\"cidr\":\"fd00:10::/64\""),
                  "spec.staticIP.ip: Invalid value: \"10.10.0.21\": must be inside "
                  "spec.staticIP.cidr (fd00:10::/64)" },
                { SIP("\"ip\":\"10.10.0.0\",\"cidr\":\"10.10.0.0/24\""),
                  "spec.staticIP.ip: Invalid value: \"10.10.0.0\": must not be the network "
                  "address of 10.10.0.0/24" },
                { SIP("\"ip\":\"10.10.0.255\",\"cidr\":\"10.10.0.0/24\""),
                  "spec.staticIP.ip: Invalid value: \"10.10.0.255\": must not be the broadcast "
                  "address of 10.10.0.0/24" },
                { SIP(GOOD_SIP ",\"gateway\":\"10.10.9.1\""),
                  "spec.staticIP.gateway: Invalid value: \"10.10.9.1\": must be inside "
                  "spec.staticIP.cidr (10.10.0.0/24)" },
                { SIP(GOOD_SIP ",\"gateway\":\"router\""),
                  "spec.staticIP.gateway: Invalid value: \"router\": must be an IPv4 or IPv6 "
                  "address" },
                { SIP(GOOD_SIP ",\"gateway\":\"10.10.0.21\""),
                  "spec.staticIP.gateway: Invalid value: \"10.10.0.21\": must not be the "
                  "machine's own address" },
                { SIP(GOOD_SIP ",\"nameservers\":[\"10.10.0.2\",\"dns.local\"]"),
                  "spec.staticIP.nameservers[1]: Invalid value: \"dns.local\": must be an IPv4 "
                  "or IPv6 address" },
                { SIP(GOOD_SIP ",\"nameservers\":[\"\"]"),
                  "spec.staticIP.nameservers[0]: Invalid value: \"\": must be an IPv4 or IPv6 "
                  "address" },
                { SIP(GOOD_SIP ",\"interface\":\"eth 0\""),
                  "spec.staticIP.interface: Invalid value: \"eth 0\": must be an interface name: "
                  "1-15 letters, digits, '.', '-' and '_'" },
                { SIP(GOOD_SIP ",\"interface\":\"abcdefghijklmnop\""),
                  "spec.staticIP.interface: Invalid value: \"abcdefghijklmnop\": must be an "
                  "interface name: 1-15 letters, digits, '.', '-' and '_'" },
        };

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                expect_machine(rows[i][0], rows[i][1]);
}

#define POOL(g, k, n) ",\"addressesFromPools\":[{" g k n "}]"
#define G_OK          "\"apiGroup\":\"ipam.cluster.x-k8s.io\","
#define K_OK          "\"kind\":\"InClusterIPPool\","
#define N_OK          "\"name\":\"cp-pool\""

static void test_validate__pool_refs_and_exclusivity_name_the_field(void **state)
{
        static const char *const rows[][2] = {
                { POOL(G_OK, K_OK, N_OK), NULL },
                { POOL("", K_OK, N_OK), "spec.addressesFromPools[0].apiGroup: Required value" },
                { POOL("\"apiGroup\":\"IPAM\",", K_OK, N_OK),
                  "spec.addressesFromPools[0].apiGroup: Invalid value: \"IPAM\": must be an API "
                  "group: a lowercase RFC 1123 subdomain (e.g. ipam.cluster.x-k8s.io)" },
                { POOL(G_OK, "", N_OK), "spec.addressesFromPools[0].kind: Required value" },
                { POOL(G_OK, "\"kind\":\"in-cluster\",", N_OK),
                  "spec.addressesFromPools[0].kind: Invalid value: \"in-cluster\": must be a "
                  "kind: a letter, then letters and digits (e.g. InClusterIPPool)" },
                { POOL(G_OK, K_OK, "\"name\":\"\""),
                  "spec.addressesFromPools[0].name: Required value" },
                { POOL(G_OK, K_OK, "\"name\":\"Cp_Pool\""),
                  "spec.addressesFromPools[0].name: Invalid value: \"Cp_Pool\": must be a "
                  "lowercase RFC 1123 subdomain (the pool's name)" },
                { SIP(GOOD_SIP) POOL(G_OK, K_OK, N_OK),
                  "spec.addressesFromPools: Forbidden: may not be set together with "
                  "spec.staticIP: the machine's address comes from one of them" },
        };
        struct admission_response resp;

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                expect_machine(rows[i][0], rows[i][1]);
        /* an empty list is no pool: staticIP alone */
        expect_machine(SIP(GOOD_SIP) ",\"addressesFromPools\":[]", NULL);
        /* only the first pool is used: said in a warning */
        expect_create("MaasMachine", MM_SPEC,
                      ",\"addressesFromPools\":[{" G_OK K_OK N_OK "},{" G_OK K_OK
                      "\"name\":\"b\"}]",
                      false, NULL, &resp);
        assert_int_equal(resp.n_warnings, 1);
        assert_string_equal(resp.warnings[0], "spec.addressesFromPools: only the first pool is "
                                              "used (2 are listed)");
        admission_response_release(&resp);
}

/* A template cannot see how many machines it makes: staticIP there is allowed with a warning
 * saying that only one machine can hold the address and pointing to addressesFromPools,
 * which a template may carry. */
static void test_validate__template_static_ip_warns(void **state)
{
        struct admission_response resp;

        (void)state;
        expect_create("MaasMachineTemplate", MM_SPEC, SIP(GOOD_SIP), true, NULL, &resp);
        assert_int_equal(resp.n_warnings, 1);
        assert_string_equal(resp.warnings[0],
                            "spec.template.spec.staticIP: every machine made from this template "
                            "asks for 10.10.0.21, and only one can hold it: one replica only, and "
                            "a rollout that creates the new machine before deleting the old one "
                            "waits for its address; spec.template.spec.addressesFromPools gives "
                            "each machine its own");
        admission_response_release(&resp);
        /* the value rules still apply inside the template */
        expect_create(
                "MaasMachineTemplate", MM_SPEC,
                SIP("\"ip\":\"10.10.0.0\",\"cidr\":\"10.10.0.0/24\""), true,
                "spec.template.spec.staticIP.ip: Invalid value: \"10.10.0.0\": must not be the "
                "network address of 10.10.0.0/24",
                &resp);
        admission_response_release(&resp);
        expect_create("MaasMachineTemplate", MM_SPEC, POOL(G_OK, K_OK, N_OK), true, NULL, &resp);
        assert_int_equal(resp.n_warnings, 0);
        admission_response_release(&resp);
        expect_create("MaasMachineTemplate", MM_SPEC, POOL(G_OK, K_OK, "\"name\":\"A\""), true,
                      "spec.template.spec.addressesFromPools[0].name: Invalid value: \"A\": "
                      "must be a lowercase RFC 1123 subdomain (the pool's name)",
                      &resp);
        admission_response_release(&resp);
        /* a MaasMachine with staticIP gets no such warning */
        expect_create("MaasMachine", MM_SPEC, SIP(GOOD_SIP), false, NULL, &resp);
        assert_int_equal(resp.n_warnings, 0);
        admission_response_release(&resp);
}

static void test_validate__dns_record_addresses_rules(void **state)
{
        static const char *const rows[][2] = {
                { ",\"dnsRecordAddresses\":{\"cidr\":\"10.20.0.0/24\"}", NULL },
                { ",\"dnsRecordAddresses\":{\"cidr\":\"fd00:20::/64\",\"interface\":\"eth1\"}",
                  NULL },
                { ",\"dnsRecordAddresses\":{}", "spec.dnsRecordAddresses.cidr: Required value" },
                { ",\"dnsRecordAddresses\":{\"cidr\":\"10.20.0.0\"}",
                  "spec.dnsRecordAddresses.cidr: Invalid value: \"10.20.0.0\": must be a CIDR: "
                  "an IPv4 or IPv6 network and a prefix length (e.g. 10.10.0.0/24)" },
                { ",\"dnsRecordAddresses\":{\"cidr\":\"10.20.0.0/24\",\"interface\":\"\"}",
                  "spec.dnsRecordAddresses.interface: Invalid value: \"\": must be an interface "
                  "name: 1-15 letters, digits, '.', '-' and '_'" },
        };
        struct admission_response resp;

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                expect_create("MaasCluster", MC_SPEC, rows[i][0], false, rows[i][1], &resp);
                admission_response_release(&resp);
        }
        expect_create("MaasClusterTemplate", MC_SPEC, ",\"dnsRecordAddresses\":{\"cidr\":\"x\"}",
                      true,
                      "spec.template.spec.dnsRecordAddresses.cidr: Invalid value: \"x\": must be a "
                      "CIDR: an IPv4 or IPv6 network and a prefix length (e.g. 10.10.0.0/24)",
                      &resp);
        admission_response_release(&resp);
}

/* staticIP and addressesFromPools are fixed for a MaasMachine's life: added, removed or
 * edited on UPDATE is denied naming the field. */
static void test_validate__static_fields_immutable_on_update(void **state)
{
        static const char *const pairs[][3] = {
                { SIP(GOOD_SIP), SIP("\"ip\":\"10.10.0.22\",\"cidr\":\"10.10.0.0/24\""),
                  "spec.staticIP: Forbidden" },
                { SIP(GOOD_SIP), SIP(GOOD_SIP ",\"nameservers\":[\"10.10.0.2\"]"),
                  "spec.staticIP: Forbidden" },
                { "", SIP(GOOD_SIP), "spec.staticIP: Forbidden" },
                { SIP(GOOD_SIP), "", "spec.staticIP: Forbidden" },
                { "", POOL(G_OK, K_OK, N_OK), "spec.addressesFromPools: Forbidden" },
                { POOL(G_OK, K_OK, N_OK), POOL(G_OK, K_OK, "\"name\":\"other\""),
                  "spec.addressesFromPools: Forbidden" },
        };
        struct admission_response resp;
        char *old, *cur, *spec;

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(pairs); i++) {
                spec = xasprintf(MM_SPEC "%s}", pairs[i][0]);
                old = xasprintf(OBJ_HEAD "%s}", "MaasMachine", spec);
                free(spec);
                spec = xasprintf(MM_SPEC "%s}", pairs[i][1]);
                cur = xasprintf(OBJ_HEAD "%s}", "MaasMachine", spec);
                review_update(old, cur, &resp);
                if (resp.allowed || !strstr(resp.message, pairs[i][2]))
                        fail_msg("%s -> %s: %s", pairs[i][0], pairs[i][1],
                                 resp.allowed ? "allowed" : resp.message);
                assert_non_null(strstr(resp.message, "field is immutable"));
                admission_response_release(&resp);
                /* the same fields with another spec change: allowed */
                free(cur);
                free(spec);
                spec = xasprintf("{\"image\":\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096,"
                                 "\"tags\":[\"a\"]%s}",
                                 pairs[i][0]);
                cur = xasprintf(OBJ_HEAD "%s}", "MaasMachine", spec);
                review_update(old, cur, &resp);
                if (!resp.allowed)
                        fail_msg("unchanged %s denied: %s", pairs[i][0], resp.message);
                admission_response_release(&resp);
                free(spec);
                free(cur);
                free(old);
        }
}

/* The MAAS checks of staticIP on a snapshot built by hand: the subnet must be MAAS's, spelt
 * as MAAS writes it; an address another machine holds is a warning; a snapshot that knows no
 * subnets (MAAS without subnets/) checks nothing. */
static void test_validate__static_ip_maas_checks(void **state)
{
        struct maas_subnet subnets[] = {
                { .id = 1,
                  .name = (char[]){ "prov" },
                  .cidr = (char[]){ "10.20.0.0/24" },
                  .vid = -1 },
                { .id = 2,
                  .name = (char[]){ "v6" },
                  .cidr = (char[]){ "fd00:20::/64" },
                  .vid = -1 },
        };
        char *ips[] = { (char[]){ "10.20.0.9" } };
        struct maas_node node = { .system_id = (char[]){ "abc123" },
                                  .ip_addresses = { .v = ips, .n = 1 } };
        struct maas_inventory_lists l = { .subnets = { subnets, 2 }, .machines = { &node, 1 } };
        struct maas_inventory_snapshot *snap = maas_inventory_snapshot_build(&l, 0);
        struct maas_machine_spec sp = { 0 };
        struct schema_static_ip st = { 0 };
        struct admission_response warn = { 0 };
        struct field_errors fe;
        struct maas_check c = { .path = "spec", .s = snap, .fe = &fe, .warn = &warn };

        (void)state;
        field_errors_init(&fe);
        sp.static_ip = &st;
        st.ip = (char[]){ "10.40.0.5" };
        st.cidr = (char[]){ "10.40.0.0/24" };
        assert_false(maas_check_static_ip(&sp, &c));
        assert_only_error(&fe, "spec.staticIP.cidr: Invalid value: \"10.40.0.0/24\": no such "
                               "subnet in MAAS (known: 10.20.0.0/24, fd00:20::/64)");
        st.ip = (char[]){ "fd00:20::5" };
        st.cidr = (char[]){ "fd00:0020::/64" };
        assert_true(maas_check_static_ip(&sp, &c));
        assert_only_error(&fe, "spec.staticIP.cidr: Invalid value: \"fd00:0020::/64\": MAAS "
                               "writes this subnet fd00:20::/64: write it the same way");
        st.ip = (char[]){ "10.20.0.9" };
        st.cidr = (char[]){ "10.20.0.0/24" };
        assert_true(maas_check_static_ip(&sp, &c));
        assert_int_equal(fe.n, 0);
        assert_int_equal(warn.n_warnings, 1);
        assert_string_equal(warn.warnings[0],
                            "spec.staticIP.ip: 10.20.0.9 is already in use by MAAS machine "
                            "abc123; the machine will not deploy with it until that machine "
                            "releases it");
        admission_response_release(&warn);
        warn = (struct admission_response){ 0 };
        sp.system_id = (char[]){ "abc123" }; /* its own machine */
        assert_true(maas_check_static_ip(&sp, &c));
        assert_int_equal(warn.n_warnings, 0);
        maas_inventory_snapshot_release(snap);

        l.no_subnets = true;
        l.subnets = (struct maas_subnet_list){ 0 };
        snap = maas_inventory_snapshot_build(&l, 0);
        c.s = snap;
        st.cidr = (char[]){ "10.99.0.0/24" };
        assert_true(maas_check_static_ip(&sp, &c));
        assert_int_equal(fe.n, 0);
        maas_inventory_snapshot_release(snap);
        field_errors_release(&fe);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_validate__quote_matches_go_percent_q),
                cmocka_unit_test(test_validate__error_text_shows_value_only_where_kubernetes_does),
                cmocka_unit_test(test_validate__deny_aggregates_like_new_invalid),
                cmocka_unit_test(test_validate__subtract_drops_errors_the_old_object_had),
                cmocka_unit_test(test_validate__errors_beyond_the_cap_are_counted),
                cmocka_unit_test(test_validate__image_rules),
                cmocka_unit_test(test_validate__image_length_is_capped),
                cmocka_unit_test(test_validate__dns_names_and_hosts),
                cmocka_unit_test(test_validate__maas_names_and_provider_ids),
                cmocka_unit_test(test_validate__immutability_messages_in_reference_order),
                cmocka_unit_test(test_validate__defaulting_patches),
                cmocka_unit_test(test_validate__kinds_are_found_by_name),
                cmocka_unit_test(test_validate__reference_objects_may_always_lose_their_finalizer),
                cmocka_unit_test(test_validate__metadata_only_update_is_not_defaulted),
                cmocka_unit_test(test_validate__unchanged_legacy_spec_is_not_judged),
                cmocka_unit_test(test_validate__spec_change_of_reference_object_is_judged),
                cmocka_unit_test(test_validate__identity_ref_is_a_secret_and_immutable),
                cmocka_unit_test(test_validate__status_never_denies),
                cmocka_unit_test(test_validate__provider_id_immutable_once_provisioned),
                cmocka_unit_test(test_validate__static_ip_rules_name_the_field),
                cmocka_unit_test(test_validate__pool_refs_and_exclusivity_name_the_field),
                cmocka_unit_test(test_validate__template_static_ip_warns),
                cmocka_unit_test(test_validate__dns_record_addresses_rules),
                cmocka_unit_test(test_validate__static_fields_immutable_on_update),
                cmocka_unit_test(test_validate__static_ip_maas_checks),
        };

        xalloc_install_cjson_hooks();
        return cmocka_run_group_tests_name("validate", tests, NULL, NULL);
}
