/*
 * Unit tests for the legacy shapes of schema.h: every object in tests/fixtures/reference is
 * written exactly as the reference provider writes it (v0.7 and v0.8: CAPI v1beta1 shapes,
 * status.failureDomains as a map, conditions with severity and without reason; HEAD: the
 * current shapes). Each decodes without an error, encodes in the current shape (the
 * migration a status write makes), keeps its unknown fields, and a second decode/encode
 * changes nothing more.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "json.h"
#include "schema.h"
#include "testutil.h"
#include "xalloc.h"

static void print_errors(const struct json_errors *e)
{
        for (size_t i = 0; i < e->n; i++)
                print_error("%s: %s\n", e->items[i].path, e->items[i].message);
}

/* Decodes obj by its kind (no error allowed) and encodes it again: what a write of the
 * decoded object sends. */
static cJSON *decode_encode(const cJSON *obj)
{
        const char *kind = json_find_str(obj, "kind", NULL);

        union {
                struct maas_cluster c;
                struct maas_machine m;
                struct maas_machine_template mt;
                struct maas_cluster_template ct;
        } v;
        struct json_errors e;
        cJSON *out = NULL;
        int r = CM_EINVAL;

        assert_non_null(kind);
        json_errors_init(&e);
        if (strcmp(kind, SCHEMA_KIND_CLUSTER) == 0) {
                r = maas_cluster_decode(obj, &v.c, &e);
                if (r == CM_OK)
                        assert_int_equal(maas_cluster_encode(&v.c, &out), CM_OK);
                maas_cluster_release(r == CM_OK ? &v.c : NULL);
        } else if (strcmp(kind, SCHEMA_KIND_MACHINE) == 0) {
                r = maas_machine_decode(obj, &v.m, &e);
                if (r == CM_OK)
                        assert_int_equal(maas_machine_encode(&v.m, &out), CM_OK);
                maas_machine_release(r == CM_OK ? &v.m : NULL);
        } else if (strcmp(kind, SCHEMA_KIND_MACHINE_TEMPLATE) == 0) {
                r = maas_machine_template_decode(obj, &v.mt, &e);
                if (r == CM_OK)
                        assert_int_equal(maas_machine_template_encode(&v.mt, &out), CM_OK);
                maas_machine_template_release(r == CM_OK ? &v.mt : NULL);
        }
        print_errors(&e);
        assert_int_equal(e.n, 0);
        assert_int_equal(r, CM_OK);
        json_errors_release(&e);
        return out;
}

/* The current shape: failureDomains (when present) a list of {name, ...}; every condition
 * has a non-empty reason and no severity. */
static void assert_current_shape(const cJSON *obj)
{
        const cJSON *fd = json_at(obj, "status.failureDomains");
        const cJSON *it;

        if (fd) {
                assert_true(cJSON_IsArray(fd));
                cJSON_ArrayForEach (it, fd)
                        assert_non_null(json_find_str(it, "name", NULL));
        }
        cJSON_ArrayForEach (it, json_at(obj, "status.conditions")) {
                const char *reason = json_find_str(it, "reason", NULL);

                assert_non_null(reason);
                assert_true(reason[0] != '\0');
                assert_null(json_find(it, "severity", NULL));
        }
}

static const char *const fixtures[] = {
        "v0.7-maascluster.json", "v0.7-maasmachine.json", "v0.7-maasmachinetemplate.json",
        "v0.8-maascluster.json", "v0.8-maasmachine.json", "v0.8-maasmachinetemplate.json",
        "head-maascluster.json", "head-maasmachine.json",
};

/* Every fixture decodes; the encoding is in the current shape, and decoding and encoding
 * that again is a fixed point (the migration happens once). */
static void test_schema_reference__every_fixture_decodes_and_migrates_once(void **state)
{
        (void)state;
        for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
                cJSON *in = test_fixture_json("reference/%s", fixtures[i]);
                cJSON *once;
                cJSON *twice;

                print_message("%s\n", fixtures[i]);
                once = decode_encode(in);
                assert_current_shape(once);
                /* metadata and spec are never rewritten by the migration */
                test_assert_same_json(json_at(in, "metadata"), json_at(once, "metadata"));
                test_assert_same_json(json_at(in, "spec"), json_at(once, "spec"));
                twice = decode_encode(once);
                test_assert_same_json(once, twice);
                cJSON_Delete(twice);
                cJSON_Delete(once);
                cJSON_Delete(in);
        }
}

/* v0.7: {"az1": {"controlPlane": true}, ...} reads as the list, in the map's order; a Ready
 * object without status.initialization is provisioned. */
static void test_schema_reference__v07_failure_domain_map_reads_as_a_list(void **state)
{
        cJSON *in = test_fixture_json("reference/v0.7-maascluster.json");
        cJSON *want = test_json("[{\"name\": \"az1\", \"controlPlane\": true},"
                                " {\"name\": \"az2\", \"controlPlane\": true}]");
        struct maas_cluster c;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_cluster_decode(in, &c, NULL), CM_OK);
        assert_true(c.status.failure_domains.present);
        assert_int_equal(c.status.failure_domains.n, 2);
        assert_string_equal(c.status.failure_domains.items[0].name, "az1");
        assert_true(c.status.failure_domains.items[0].has_control_plane &&
                    c.status.failure_domains.items[0].control_plane);
        assert_string_equal(c.status.failure_domains.items[1].name, "az2");
        assert_string_equal(c.status.network->dns_name, "legacy-9e41c7.maas");
        /* v0.7 wrote only ready: it reads as provisioned too, as HEAD would write it */
        assert_true(c.status.ready && c.status.has_provisioned && c.status.provisioned);
        assert_int_equal(maas_cluster_encode(&c, &out), CM_OK);
        test_assert_same_json(want, json_at(out, "status.failureDomains"));
        assert_true(cJSON_IsTrue(json_at(out, "status.initialization.provisioned")));
        cJSON_Delete(out);
        cJSON_Delete(want);
        maas_cluster_release(&c);
        cJSON_Delete(in);
}

/* An API server serving the current CRD prunes the map's members away: {} reads as []. */
static void test_schema_reference__pruned_empty_map_reads_as_an_empty_list(void **state)
{
        cJSON *in = test_fixture_json("reference/v0.8-maascluster.json");
        struct maas_cluster c;
        cJSON *out = NULL;

        (void)state;
        assert_true(cJSON_IsObject(json_at(in, "status.failureDomains")));
        assert_int_equal(maas_cluster_decode(in, &c, NULL), CM_OK);
        assert_true(c.status.failure_domains.present);
        assert_int_equal(c.status.failure_domains.n, 0);
        /* the not-yet-ready endpoint the reference always serialises */
        assert_string_equal(c.spec.control_plane_endpoint->host, "");
        assert_int_equal(maas_cluster_encode(&c, &out), CM_OK);
        assert_true(cJSON_IsArray(json_at(out, "status.failureDomains")));
        assert_int_equal(cJSON_GetArraySize(json_at(out, "status.failureDomains")), 0);
        cJSON_Delete(out);
        maas_cluster_release(&c);
        cJSON_Delete(in);
}

/* A value of another type is still a type error naming the field. */
static void test_schema_reference__failure_domains_of_another_type_is_an_error(void **state)
{
        cJSON *in = test_json("{\"kind\": \"MaasCluster\", \"metadata\": {\"name\": \"x\"},"
                              " \"spec\": {\"dnsDomain\": \"maas\"},"
                              " \"status\": {\"failureDomains\": \"az1\"}}");
        struct maas_cluster c;
        struct json_errors e;

        (void)state;
        json_errors_init(&e);
        assert_int_equal(maas_cluster_decode(in, &c, &e), CM_EINVAL);
        assert_int_equal(e.n, 1);
        assert_string_equal(e.items[0].path, "status.failureDomains");
        json_errors_release(&e);
        cJSON_Delete(in);
}

/* v1beta1 conditions: severity dropped, a missing reason reads as NoReasonReported, the
 * transition time and an existing reason and message are kept. */
static void test_schema_reference__v1beta1_conditions_read_as_current(void **state)
{
        cJSON *in = test_fixture_json("reference/v0.7-maasmachine.json");
        cJSON *hcp = test_fixture_json("reference/v0.8-maasmachine.json");
        struct maas_machine m;
        struct maas_machine h;
        const struct schema_condition *cond;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_machine_decode(in, &m, NULL), CM_OK);
        cond = schema_conditions_find(&m.status.conditions, SCHEMA_COND_MACHINE_DEPLOYED);
        assert_non_null(cond);
        assert_string_equal(cond->reason, SCHEMA_REASON_NO_REASON_REPORTED);
        assert_string_equal(cond->last_transition_time, "2026-06-10T08:03:55Z");
        assert_false(cond->has_observed_generation);
        assert_true(schema_conditions_is_true(&m.status.conditions, SCHEMA_COND_READY));
        assert_string_equal(m.spec.system_id, "eccapw");
        assert_string_equal(m.spec.provider_id, "maas:///az2/eccapw");

        assert_int_equal(maas_machine_decode(hcp, &h, NULL), CM_OK);
        assert_true(schema_meta_has_finalizer(&h.meta, SCHEMA_FINALIZER_HOST_EVACUATION));
        assert_string_equal(schema_strmap_get(&h.meta.annotations, SCHEMA_ANNOTATION_VM_NAME),
                            "vm-hcp-host-0-0a7c1");
        cond = schema_conditions_find(&h.status.conditions, SCHEMA_COND_MACHINE_DEPLOYED);
        assert_string_equal(cond->reason, SCHEMA_REASON_MACHINE_TERMINATED);
        assert_int_equal(maas_machine_encode(&h, &out), CM_OK);
        assert_null(json_find(cJSON_GetArrayItem(json_at(out, "status.conditions"), 0), "severity",
                              NULL));
        assert_string_equal(json_find_str(cJSON_GetArrayItem(json_at(out, "status.conditions"), 1),
                                          "reason", NULL),
                            SCHEMA_REASON_MACHINE_TERMINATED);
        cJSON_Delete(out);
        maas_machine_release(&h);
        maas_machine_release(&m);
        cJSON_Delete(hcp);
        cJSON_Delete(in);
}

/* HEAD already writes the current shapes: its objects come back byte for byte. */
static void test_schema_reference__head_objects_are_unchanged(void **state)
{
        static const char *const head[] = { "head-maascluster.json", "head-maasmachine.json" };

        (void)state;
        for (size_t i = 0; i < 2; i++) {
                cJSON *in = test_fixture_json("reference/%s", head[i]);
                cJSON *out = decode_encode(in);

                test_assert_same_json(in, out);
                cJSON_Delete(out);
                cJSON_Delete(in);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_schema_reference__every_fixture_decodes_and_migrates_once),
                cmocka_unit_test(test_schema_reference__v07_failure_domain_map_reads_as_a_list),
                cmocka_unit_test(test_schema_reference__pruned_empty_map_reads_as_an_empty_list),
                cmocka_unit_test(
                        test_schema_reference__failure_domains_of_another_type_is_an_error),
                cmocka_unit_test(test_schema_reference__v1beta1_conditions_read_as_current),
                cmocka_unit_test(test_schema_reference__head_objects_are_unchanged),
        };

        return cmocka_run_group_tests_name("schema_reference", tests, NULL, NULL);
}
