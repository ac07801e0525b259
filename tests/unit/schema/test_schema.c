/*
 * Unit tests for schema.h: decode/encode round trips of all four kinds from
 * tests/fixtures/schema (unknown fields at several depths must survive), path-qualified
 * decode errors collected together, absent-versus-zero, the image split, providerIDs and
 * the condition helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../maas/image_split_cases.h"
#include "err.h"
#include "json.h"
#include "schema.h"
#include "testutil.h"
#include "xalloc.h"

/* ---- round trips ---- */

static void test_schema__machine_round_trip_keeps_unknown_fields(void **state)
{
        cJSON *in = test_fixture_json("schema/maasmachine.json");
        struct maas_machine m;
        struct json_errors e;
        cJSON *out = NULL;

        (void)state;
        json_errors_init(&e);
        assert_int_equal(maas_machine_decode(in, &m, &e), CM_OK);
        assert_int_equal(e.n, 0);
        assert_string_equal(m.meta.name, "demo-cp-abcde");
        assert_true(m.meta.has_generation && m.meta.generation == 3);
        assert_string_equal(schema_strmap_get(&m.meta.labels, SCHEMA_LABEL_CLUSTER_NAME), "demo");
        assert_true(schema_meta_has_finalizer(&m.meta, SCHEMA_FINALIZER_MACHINE));
        assert_string_equal(schema_meta_controller(&m.meta)->kind, "Machine");
        assert_true(m.spec.has_min_cpu && m.spec.min_cpu == 4);
        assert_true(m.spec.has_min_memory && m.spec.min_memory == 8192);
        assert_true(m.spec.has_min_disk_size && m.spec.min_disk_size == 0);
        assert_true(m.spec.has_deploy_in_memory && !m.spec.deploy_in_memory);
        assert_int_equal(m.spec.tags.n, 2);
        assert_string_equal(m.spec.tags.items[1], "ssd");
        assert_true(m.spec.lxd->vm_config->has_disk_size);
        assert_int_equal(m.spec.lxd->vm_config->disk_size, 60);
        assert_string_equal(schema_strmap_get(&m.spec.lxd->vm_config->interface_link_modes, "eth0"),
                            "AUTO");
        assert_true(m.status.present && m.status.ready && m.status.provisioned);
        assert_int_equal(m.status.addresses.n, 4);
        assert_int_equal(m.status.conditions.n, 3);
        assert_string_equal(m.status.failure_reason, "UpdateError");
        assert_null(m.spec.parent);

        assert_int_equal(maas_machine_encode(&m, &out), CM_OK);
        test_assert_same_json(in, out);
        /* The fixture really has unknown fields at several depths, and they came back. */
        assert_non_null(json_at(out, "futureTopLevel"));
        assert_non_null(json_at(out, "metadata.managedFields"));
        assert_non_null(json_at(out, "spec.futureSpecField"));
        assert_non_null(json_at(out, "spec.lxd.vmConfig.gpu"));
        assert_non_null(json_at(out, "status.initialization.futureInit"));
        assert_non_null(json_at(out, "status.deprecated.v1beta1"));
        cJSON_Delete(out);
        maas_machine_release(&m);
        cJSON_Delete(in);
}

static void test_schema__decode_view_reads_the_same_without_a_copy(void **state)
{
        cJSON *in = test_fixture_json("schema/maasmachine.json");
        struct maas_machine full;
        struct maas_machine view;
        struct json_errors e;
        cJSON *a = NULL;
        cJSON *b = NULL;

        (void)state;
        json_errors_init(&e);
        assert_int_equal(maas_machine_decode(in, &full, &e), CM_OK);
        assert_int_equal(schema_decode_view(schema_codec_find(SCHEMA_KIND_MACHINE), in, &view, &e),
                         CM_OK);
        assert_non_null(full.raw);
        assert_null(view.raw);
        /* Every known field is the same: both encode to the same object once the copy of
         * the input (which brings back the unknown fields) is out of the way. */
        cJSON_Delete(full.raw);
        full.raw = NULL;
        assert_int_equal(maas_machine_encode(&full, &a), CM_OK);
        assert_int_equal(maas_machine_encode(&view, &b), CM_OK);
        test_assert_same_json(a, b);
        assert_null(json_at(b, "futureTopLevel"));
        cJSON_Delete(a);
        cJSON_Delete(b);
        maas_machine_release(&full);
        maas_machine_release(&view);
        json_errors_release(&e);
        cJSON_Delete(in);
}

/* Admission's decode: metadata and spec as decode_view reads them, status not looked at,
 * so a status of a shape the schema refuses decodes all the same. */
static void test_schema__spec_view_ignores_status(void **state)
{
        const struct schema_kind_desc *k = schema_codec_find(SCHEMA_KIND_MACHINE);
        cJSON *in = test_fixture_json("schema/maasmachine.json");
        struct maas_machine view;
        struct maas_machine spec_view;
        struct json_errors e;

        (void)state;
        json_errors_init(&e);
        assert_int_equal(schema_decode_view(k, in, &view, &e), CM_OK);
        assert_int_equal(schema_decode_spec_view(k, in, &spec_view, &e), CM_OK);
        assert_true(view.status.present);
        assert_false(spec_view.status.present);
        assert_null(spec_view.status.hostname);
        assert_string_equal(spec_view.meta.name, view.meta.name);
        assert_string_equal(spec_view.spec.image, view.spec.image);
        schema_release(k, &spec_view);
        /* status.ready as a string: decode_view refuses it, the spec view does not care */
        json_set_string(cJSON_GetObjectItemCaseSensitive(in, "status"), "ready", "yes");
        assert_int_equal(schema_decode_spec_view(k, in, &spec_view, &e), CM_OK);
        schema_release(k, &spec_view);
        maas_machine_release(&view);
        assert_int_equal(schema_decode_view(k, in, &view, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "status.ready: expected boolean, got string"));
        json_errors_release(&e);
        cJSON_Delete(in);
}

static void test_schema__cluster_round_trip_keeps_unknown_fields(void **state)
{
        cJSON *in = test_fixture_json("schema/maascluster.json");
        struct maas_cluster c;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_cluster_decode(in, &c, NULL), CM_OK);
        assert_string_equal(c.spec.dns_domain, "maas");
        assert_string_equal(c.spec.control_plane_endpoint->host, "demo-a1b2c3.maas");
        assert_int_equal(c.spec.control_plane_endpoint->port, 6443);
        assert_int_equal(c.spec.failure_domains.n, 2);
        assert_true(c.spec.lxd_config->has_enabled && c.spec.lxd_config->enabled);
        assert_string_equal(c.spec.lxd_config->nic_type, "bridge");
        assert_string_equal(c.status.network->dns_name, "demo-a1b2c3.maas");
        assert_int_equal(c.status.failure_domains.n, 2);
        assert_string_equal(
                schema_strmap_get(&c.status.failure_domains.items[0].attributes, "rack"), "r1");
        assert_false(c.status.failure_domains.items[1].attributes.present);
        assert_string_equal(c.meta.deletion_timestamp, "2026-06-30T12:00:00Z");
        assert_non_null(schema_meta_owner(&c.meta, "cluster.x-k8s.io", "Cluster"));
        assert_null(schema_meta_owner(&c.meta, "infrastructure.cluster.x-k8s.io", "Cluster"));
        assert_int_equal(maas_cluster_encode(&c, &out), CM_OK);
        test_assert_same_json(in, out);
        assert_non_null(json_at(out, "spec.lxdConfig.futureLXD"));
        assert_non_null(json_at(out, "status.network.futureNet"));
        cJSON_Delete(out);
        maas_cluster_release(&c);
        cJSON_Delete(in);
}

static void test_schema__machine_template_round_trip(void **state)
{
        cJSON *in = test_fixture_json("schema/maasmachinetemplate.json");
        struct maas_machine_template t;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_machine_template_decode(in, &t, NULL), CM_OK);
        assert_int_equal(t.spec.min_cpu, 2);
        assert_string_equal(t.spec.image, "u-2204-0-k-1329-0");
        assert_true(t.spec.tags.present);
        assert_int_equal(t.spec.tags.n, 0);
        assert_null(t.meta.creation_timestamp); /* null is absent ... */
        assert_int_equal(maas_machine_template_encode(&t, &out), CM_OK);
        test_assert_same_json(in, out); /* ... and survives as null */
        assert_true(cJSON_IsNull(json_at(out, "metadata.creationTimestamp")));
        assert_non_null(json_at(out, "spec.template.metadata.labels"));
        assert_non_null(json_at(out, "spec.template.futureTemplate"));
        assert_non_null(json_at(out, "spec.template.spec.futureTemplateSpec.nested"));
        assert_non_null(json_at(out, "status.capacity"));
        cJSON_Delete(out);
        maas_machine_template_release(&t);
        cJSON_Delete(in);
}

static void test_schema__cluster_template_round_trip(void **state)
{
        cJSON *in = test_fixture_json("schema/maasclustertemplate.json");
        struct maas_cluster_template t;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_cluster_template_decode(in, &t, NULL), CM_OK);
        assert_string_equal(t.spec.dns_domain, "maas");
        assert_string_equal(t.spec.control_plane_endpoint->host, "");
        assert_true(t.spec.control_plane_endpoint->has_port);
        assert_int_equal(t.spec.control_plane_endpoint->port, 0);
        assert_true(t.spec.lxd_config->has_enabled && !t.spec.lxd_config->enabled);
        assert_int_equal(maas_cluster_template_encode(&t, &out), CM_OK);
        test_assert_same_json(in, out);
        cJSON_Delete(out);
        maas_cluster_template_release(&t);
        cJSON_Delete(in);
}

static void test_schema__edits_keep_unknown_fields_of_list_entries(void **state)
{
        cJSON *in = test_fixture_json("schema/maasmachine.json");
        const struct schema_condition_in deployed = { SCHEMA_COND_MACHINE_DEPLOYED,
                                                      SCHEMA_CONDITION_FALSE,
                                                      SCHEMA_REASON_MACHINE_POWERED_OFF,
                                                      "powered off" };
        struct maas_machine m;
        cJSON *out = NULL;
        const cJSON *conds;
        const cJSON *dns;

        (void)state;
        assert_int_equal(maas_machine_decode(in, &m, NULL), CM_OK);
        assert_true(schema_conditions_set(&m.status.conditions, &deployed, 4, 1782900000));
        assert_true(schema_conditions_remove(&m.status.conditions, SCHEMA_COND_READY));
        free(m.spec.provider_id);
        m.spec.provider_id = NULL;
        schema_strv_add(&m.spec.tags, "gpu");
        assert_int_equal(maas_machine_encode(&m, &out), CM_OK);
        conds = json_at(out, "status.conditions");
        assert_int_equal(cJSON_GetArraySize(conds), 2);
        dns = cJSON_GetArrayItem(conds, 0);
        assert_string_equal(json_at(dns, "type")->valuestring, "DNSAttached");
        assert_string_equal(json_at(dns, "futureConditionField")->valuestring,
                            "Info"); /* matched by type */
        assert_string_equal(json_at(cJSON_GetArrayItem(conds, 1), "reason")->valuestring,
                            "MachinePoweredOff");
        assert_null(json_at(out, "spec.providerID"));
        assert_int_equal(cJSON_GetArraySize(json_at(out, "spec.tags")), 3);
        assert_non_null(json_at(out, "metadata.ownerReferences")->child->child);
        assert_non_null(json_at(cJSON_GetArrayItem(json_at(out, "metadata.ownerReferences"), 0),
                                "futureOwnerField"));
        cJSON_Delete(out);
        maas_machine_release(&m);
        cJSON_Delete(in);
}

/* ---- decode errors ---- */

static void test_schema__decode_reports_every_error_with_its_path(void **state)
{
        cJSON *in =
                test_json("{\"apiVersion\":5,\"metadata\":{\"name\":[],\"labels\":{\"foo\":{},"
                          "\"ok\":\"v\",\"cluster.x-k8s.io/x\":1},\"generation\":\"3\","
                          "\"ownerReferences\":[{\"controller\":\"yes\"},7]},"
                          "\"spec\":{\"minCPU\":\"4\",\"tags\":[\"a\",5],\"image\":false,"
                          "\"lxd\":{\"vmConfig\":{\"diskSize\":2.5,\"interfaceLinkModes\":[]}}},"
                          "\"status\":{\"ready\":\"true\",\"initialization\":{\"provisioned\":1},"
                          "\"conditions\":[{\"type\":\"Ready\",\"status\":true}],"
                          "\"addresses\":{}}}");
        static const char *want[] = {
                "apiVersion: expected string, got integer",
                "metadata.name: expected string, got array",
                "metadata.generation: expected integer, got string",
                "metadata.labels.foo: expected string, got object",
                "metadata.labels[cluster.x-k8s.io/x]: expected string, got integer",
                "metadata.ownerReferences[0].controller: expected boolean, got string",
                "metadata.ownerReferences[1]: expected object, got integer",
                "spec.minCPU: expected integer, got string",
                "spec.tags[1]: expected string, got integer",
                "spec.image: expected string, got boolean",
                "spec.lxd.vmConfig.diskSize: expected integer, got number",
                "spec.lxd.vmConfig.interfaceLinkModes: expected object, got array",
                "status.ready: expected boolean, got string",
                "status.addresses: expected array, got object",
                "status.conditions[0].status: expected string, got boolean",
                "status.initialization.provisioned: expected boolean, got integer",
        };
        struct maas_machine m;
        struct json_errors e;

        (void)state;
        memset(&m, 0xAB, sizeof(m));
        json_errors_init(&e);
        assert_int_equal(maas_machine_decode(in, &m, &e), CM_EINVAL);
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                if (!json_errors_contains(&e, want[i]))
                        fail_msg("missing error: %s (have %s)", want[i],
                                 json_errors_join(&e, " | "));
        }
        assert_int_equal(e.n, sizeof(want) / sizeof(want[0]));
        assert_int_equal(((unsigned char *)&m)[0], 0xAB); /* ret untouched on failure */
        json_errors_release(&e);
        cJSON_Delete(in);
}

static void test_schema__template_errors_carry_template_path(void **state)
{
        cJSON *in = test_json("{\"spec\":{\"template\":{\"spec\":{\"minCPU\":\"2\",\"minMemory\":"
                              "9007199254740993,\"minDiskSize\":1e300}}}}");
        cJSON *bad = test_json("{\"spec\":{\"template\":[]}}");
        cJSON *cl = test_json("{\"spec\":{\"template\":{\"spec\":{\"controlPlaneEndpoint\":"
                              "{\"port\":4294967296},\"failureDomains\":\"a\"}}}}");
        struct maas_machine_template t;
        struct maas_cluster_template ct;
        struct json_errors e;

        (void)state;
        json_errors_init(&e);
        assert_int_equal(maas_machine_template_decode(in, &t, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "spec.template.spec.minCPU: expected integer, "
                                             "got string"));
        assert_true(json_errors_contains(&e, "spec.template.spec.minMemory: integer out of "
                                             "range (must be between -9007199254740991 and "
                                             "9007199254740991)"));
        assert_true(json_errors_contains(&e, "spec.template.spec.minDiskSize: integer out of "
                                             "range (must be between -9007199254740991 and "
                                             "9007199254740991)"));
        assert_int_equal(maas_machine_template_decode(bad, &t, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "spec.template: expected object, got array"));
        assert_int_equal(maas_cluster_template_decode(cl, &ct, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "spec.template.spec.controlPlaneEndpoint.port: "
                                             "integer out of range (must be between "
                                             "-2147483648 and 2147483647)"));
        assert_true(json_errors_contains(&e, "spec.template.spec.failureDomains: expected "
                                             "array, got string"));
        assert_int_equal(e.n, 6);
        json_errors_release(&e);
        cJSON_Delete(in);
        cJSON_Delete(bad);
        cJSON_Delete(cl);
}

static void test_schema__decode_rejects_non_objects(void **state)
{
        cJSON *in = test_json("[1]");
        struct maas_cluster c;
        struct json_errors e;

        (void)state;
        json_errors_init(&e);
        assert_int_equal(maas_cluster_decode(in, &c, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "expected object, got array"));
        assert_int_equal(maas_cluster_decode(NULL, &c, NULL), CM_EINVAL);
        json_errors_release(&e);
        cJSON_Delete(in);
}

static void test_schema__error_list_is_capped(void **state)
{
        cJSON *tags = cJSON_CreateArray();
        cJSON *in = test_json("{\"spec\":{}}");
        struct maas_machine m;
        struct json_errors e;

        (void)state;
        for (int i = 0; i < 100; i++)
                cJSON_AddItemToArray(tags, cJSON_CreateNumber(i));
        cJSON_AddItemToObject(cJSON_GetObjectItemCaseSensitive(in, "spec"), "tags", tags);
        json_errors_init(&e);
        assert_int_equal(maas_machine_decode(in, &m, &e), CM_EINVAL);
        assert_int_equal(e.n, JSON_ERRORS_MAX);
        assert_int_equal(e.dropped, 100 - JSON_ERRORS_MAX);
        assert_true(json_errors_contains(&e, "spec.tags[63]: expected string, got integer"));
        json_errors_release(&e);
        cJSON_Delete(in);
}

/* ---- absent versus zero ---- */

static void test_schema__absent_and_zero_differ(void **state)
{
        cJSON *in = test_json("{\"spec\":{\"minCPU\":0,\"deployInMemory\":false,\"tags\":[],"
                              "\"systemID\":null,\"image\":\"\"}}");
        struct maas_machine m;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_machine_decode(in, &m, NULL), CM_OK);
        assert_true(m.spec.has_min_cpu);
        assert_int_equal(m.spec.min_cpu, 0);
        assert_false(m.spec.has_min_memory);
        assert_true(m.spec.has_deploy_in_memory);
        assert_true(m.spec.tags.present);
        assert_false(m.spec.has_min_disk_size);
        assert_null(m.spec.system_id);
        assert_string_equal(m.spec.image, "");
        assert_null(m.spec.lxd);
        assert_false(m.status.present);
        assert_false(m.meta.labels.present);
        assert_int_equal(maas_machine_encode(&m, &out), CM_OK);
        assert_null(json_at(out, "status"));
        assert_null(json_at(out, "spec.minMemory"));
        assert_null(json_at(out, "metadata"));
        assert_true(cJSON_IsNull(json_at(out, "spec.systemID")));
        assert_string_equal(json_at(out, "apiVersion")->valuestring, SCHEMA_API_VERSION);
        assert_string_equal(json_at(out, "kind")->valuestring, SCHEMA_KIND_MACHINE);
        cJSON_Delete(out);
        maas_machine_release(&m);
        cJSON_Delete(in);
}

static void test_schema__new_object_encodes_only_what_is_set(void **state)
{
        const struct schema_condition_in ready = { SCHEMA_COND_READY, SCHEMA_CONDITION_TRUE,
                                                   SCHEMA_REASON_MACHINE_DEPLOYED, NULL };
        cJSON *want = test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                                "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"m1\"},"
                                "\"spec\":{\"minCPU\":0,\"lxd\":{}},"
                                "\"status\":{\"ready\":false,\"initialization\":{\"provisioned\":"
                                "false},\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
                                "\"observedGeneration\":0,\"lastTransitionTime\":"
                                "\"1970-01-01T00:00:10Z\",\"reason\":\"MachineDeployed\","
                                "\"message\":\"\"}]}}");
        struct maas_machine m;
        cJSON *out = NULL;

        (void)state;
        maas_machine_init(&m);
        m.meta.name = xstrdup("m1");
        m.spec.has_min_cpu = true;
        m.spec.lxd = xcalloc(1, sizeof(*m.spec.lxd));
        m.status.present = true;
        (void)schema_conditions_set(&m.status.conditions, &ready, 0, 10);
        assert_int_equal(maas_machine_encode(&m, &out), CM_OK);
        test_assert_same_json(want, out);
        cJSON_Delete(out);
        maas_machine_release(&m);
        cJSON_Delete(want);
}

static void test_schema__status_cleared_is_removed(void **state)
{
        cJSON *in = test_fixture_json("schema/maascluster.json");
        struct maas_cluster c;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_cluster_decode(in, &c, NULL), CM_OK);
        c.status.present = false;
        schema_conditions_release(&c.status.conditions);
        assert_int_equal(maas_cluster_encode(&c, &out), CM_OK);
        assert_null(json_at(out, "status"));
        cJSON_Delete(out);
        c.status.present = true;
        c.status.has_provisioned = false;
        assert_int_equal(maas_cluster_encode(&c, &out), CM_OK);
        assert_true(cJSON_IsFalse(json_at(out, "status.initialization.provisioned")));
        assert_true(cJSON_IsTrue(json_at(out, "status.ready")));
        cJSON_Delete(out);
        maas_cluster_release(&c);
        cJSON_Delete(in);
}

/* ---- image, providerID ---- */

static void test_schema__image_split_matches_reference(void **state)
{
        char *os;
        char *series;

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(image_split_cases); i++) {
                schema_image_split(image_split_cases[i][0], &os, &series);
                assert_string_equal(os, image_split_cases[i][1]);
                assert_string_equal(series, image_split_cases[i][2]);
                free(os);
                free(series);
        }
}

static void test_schema__provider_id_format_and_parse(void **state)
{
        static const char *bad[] = { "maas://zone1/abc", "maas:///zone1/", "maas:///abc",
                                     "aws:///zone/abc",  "maas:///a/b/c",  "" };
        char *s = schema_provider_id_format("zone1", "abc789");
        char *zone = NULL;
        char *id = NULL;

        (void)state;
        assert_string_equal(s, "maas:///zone1/abc789");
        assert_int_equal(schema_provider_id_parse(s, &zone, &id), CM_OK);
        assert_string_equal(zone, "zone1");
        assert_string_equal(id, "abc789");
        free(zone);
        free(id);
        free(s);
        assert_int_equal(schema_provider_id_parse("maas:////x7", &zone, NULL), CM_OK);
        assert_string_equal(zone, "");
        free(zone);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                zone = (char *)0x1;
                assert_int_equal(schema_provider_id_parse(bad[i], &zone, &id), CM_EINVAL);
                assert_ptr_equal(zone, (char *)0x1);
        }
        assert_string_equal(schema_provider_id_system_id("maas:///zone1/abc789"), "abc789");
        assert_string_equal(schema_provider_id_system_id("aws://x"), "x");
        assert_null(schema_provider_id_system_id("maas:///zone1/"));
        assert_null(schema_provider_id_system_id("abc789"));
        assert_null(schema_provider_id_system_id("://abc"));
        assert_null(schema_provider_id_system_id("maas://"));
}

/* ---- conditions ---- */

static void test_schema__condition_transition_time_moves_only_on_flip(void **state)
{
        struct schema_conditions l = { 0 };
        struct schema_condition_in in = { "MachineDeployed", "False", "MachineDeploying", "a" };
        const struct schema_condition *c;

        (void)state;
        assert_true(schema_conditions_set(&l, &in, 1, 100));
        c = schema_conditions_find(&l, "MachineDeployed");
        assert_string_equal(c->last_transition_time, "1970-01-01T00:01:40Z");
        assert_true(c->has_observed_generation);
        assert_int_equal(c->observed_generation, 1);
        assert_false(schema_conditions_set(&l, &in, 1, 200)); /* no-op */
        in.message = "b";
        assert_true(schema_conditions_set(&l, &in, 2, 300)); /* same status: time kept */
        c = schema_conditions_find(&l, "MachineDeployed");
        assert_string_equal(c->last_transition_time, "1970-01-01T00:01:40Z");
        assert_int_equal(c->observed_generation, 2);
        assert_string_equal(c->message, "b");
        in.status = "True";
        assert_true(schema_conditions_set(&l, &in, 2, 400)); /* flip: time moves */
        c = schema_conditions_find(&l, "MachineDeployed");
        assert_string_equal(c->last_transition_time, "1970-01-01T00:06:40Z");
        assert_true(schema_conditions_is_true(&l, "MachineDeployed"));
        assert_false(schema_conditions_is_true(&l, "Ready"));
        schema_conditions_release(&l);
}

static void test_schema__conditions_sorted_ready_first_paused_last(void **state)
{
        static const char *order_in[] = { "Paused", "Zeta",     "Ready",
                                          "Alpha",  "Deleting", "Available" };
        static const char *want[] = { "Available", "Ready", "Alpha", "Zeta", "Deleting", "Paused" };
        struct schema_conditions l = { 0 };
        struct schema_condition_in in = { NULL, "True", "R", NULL };

        (void)state;
        for (size_t i = 0; i < 6; i++) {
                in.type = order_in[i];
                assert_true(schema_conditions_set(&l, &in, 1, 1));
        }
        for (size_t i = 0; i < 6; i++)
                assert_string_equal(l.items[i].type, want[i]);
        assert_true(schema_conditions_remove(&l, "Alpha"));
        assert_false(schema_conditions_remove(&l, "Alpha"));
        assert_string_equal(l.items[2].type, "Zeta");
        assert_int_equal(l.n, 5);
        schema_conditions_release(&l);
        assert_false(l.present);
}

static void test_schema__strv_and_strmap_helpers(void **state)
{
        struct schema_strv v = { 0 };
        struct schema_strmap m = { 0 };

        (void)state;
        schema_strv_add(&v, "a");
        schema_strv_add(&v, "b");
        schema_strv_add(&v, "a");
        assert_int_equal(schema_strv_find(&v, "b"), 1);
        assert_true(schema_strv_remove(&v, "a"));
        assert_int_equal(v.n, 1);
        assert_int_equal(schema_strv_find(&v, "a"), -1);
        assert_true(v.present);
        schema_strv_release(&v);
        schema_strmap_set(&m, "k", "1");
        schema_strmap_set(&m, "k", "2");
        assert_int_equal(m.n, 1);
        assert_string_equal(schema_strmap_get(&m, "k"), "2");
        assert_true(schema_strmap_remove(&m, "k"));
        assert_null(schema_strmap_get(&m, "k"));
        assert_true(m.present); /* an empty map is still present */
        schema_strmap_release(&m);
}

/* ---- static addresses and the endpoint's addresses (#19) ---- */

static void test_schema__static_ip_and_pools_round_trip(void **state)
{
        cJSON *in = test_json(
                "{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"m\"},\"spec\":{"
                "\"image\":\"ubuntu/jammy\",\"minCPU\":1,\"minMemory\":1024,"
                "\"staticIP\":{\"ip\":\"10.10.0.21\",\"cidr\":\"10.10.0.0/24\","
                "\"gateway\":\"10.10.0.1\",\"nameservers\":[\"10.10.0.2\",\"fd00::53\"],"
                "\"interface\":\"eth1\",\"futureStatic\":7},"
                "\"addressesFromPools\":[{\"apiGroup\":\"ipam.cluster.x-k8s.io\","
                "\"kind\":\"InClusterIPPool\",\"name\":\"cp-pool\",\"futureRef\":true},"
                "{\"apiGroup\":\"ipam.example.com\",\"kind\":\"NetBoxPool\",\"name\":\"b\"}]}}");
        struct maas_machine m;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_machine_decode(in, &m, NULL), CM_OK);
        assert_non_null(m.spec.static_ip);
        assert_string_equal(m.spec.static_ip->ip, "10.10.0.21");
        assert_string_equal(m.spec.static_ip->cidr, "10.10.0.0/24");
        assert_string_equal(m.spec.static_ip->gateway, "10.10.0.1");
        assert_int_equal(m.spec.static_ip->nameservers.n, 2);
        assert_string_equal(m.spec.static_ip->nameservers.items[1], "fd00::53");
        assert_string_equal(m.spec.static_ip->interface, "eth1");
        assert_true(m.spec.addresses_from_pools.present);
        assert_int_equal(m.spec.addresses_from_pools.n, 2);
        assert_string_equal(m.spec.addresses_from_pools.items[0].api_group,
                            "ipam.cluster.x-k8s.io");
        assert_string_equal(m.spec.addresses_from_pools.items[0].kind, "InClusterIPPool");
        assert_string_equal(m.spec.addresses_from_pools.items[0].name, "cp-pool");
        assert_string_equal(m.spec.addresses_from_pools.items[1].name, "b");
        /* an edit survives encode, and the unknown members of each entry come back */
        free(m.spec.static_ip->ip);
        m.spec.static_ip->ip = xstrdup("10.10.0.22");
        assert_int_equal(maas_machine_encode(&m, &out), CM_OK);
        assert_string_equal(cJSON_GetStringValue(json_at(out, "spec.staticIP.ip")), "10.10.0.22");
        assert_true(cJSON_IsNumber(json_at(out, "spec.staticIP.futureStatic")));
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(
                cJSON_GetArrayItem(json_at(out, "spec.addressesFromPools"), 0), "futureRef")));
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(cJSON_GetObjectItem(in, "spec"), "staticIP"),
                                  "ip", cJSON_CreateString("10.10.0.22"));
        test_assert_same_json(in, out);
        cJSON_Delete(out);
        maas_machine_release(&m);
        cJSON_Delete(in);
}

static void test_schema__static_fields_absent_and_new(void **state)
{
        cJSON *in = test_json("{\"spec\":{\"image\":\"x\"}}");
        struct maas_machine m;
        struct maas_cluster c;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_machine_decode(in, &m, NULL), CM_OK);
        assert_null(m.spec.static_ip);
        assert_false(m.spec.addresses_from_pools.present);
        assert_int_equal(m.spec.addresses_from_pools.n, 0);
        maas_machine_release(&m);
        assert_int_equal(maas_cluster_decode(in, &c, NULL), CM_OK);
        assert_null(c.spec.dns_record_addresses);
        maas_cluster_release(&c);

        /* a new object writes exactly what is set */
        maas_cluster_init(&c);
        c.spec.dns_record_addresses = xcalloc(1, sizeof(*c.spec.dns_record_addresses));
        c.spec.dns_record_addresses->cidr = xstrdup("10.20.0.0/24");
        assert_int_equal(maas_cluster_encode(&c, &out), CM_OK);
        assert_string_equal(cJSON_GetStringValue(json_at(out, "spec.dnsRecordAddresses.cidr")),
                            "10.20.0.0/24");
        assert_null(json_at(out, "spec.dnsRecordAddresses.interface"));
        cJSON_Delete(out);
        maas_cluster_release(&c);
        cJSON_Delete(in);
}

static void test_schema__dns_record_addresses_round_trip(void **state)
{
        cJSON *in = test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                              "\"kind\":\"MaasCluster\","
                              "\"spec\":{\"dnsDomain\":\"maas\",\"dnsRecordAddresses\":"
                              "{\"cidr\":\"10.20.0.0/24\",\"interface\":\"eth1\"}}}");
        cJSON *tin = test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                               "\"kind\":\"MaasClusterTemplate\","
                               "\"spec\":{\"template\":{\"spec\":{\"dnsDomain\":\"maas\","
                               "\"dnsRecordAddresses\":{\"cidr\":\"fd00:20::/64\"}}}}}");
        cJSON *mt = test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                              "\"kind\":\"MaasMachineTemplate\","
                              "\"spec\":{\"template\":{\"spec\":{\"image\":\"x\","
                              "\"addressesFromPools\":[{\"apiGroup\":\"g\",\"kind\":\"K\","
                              "\"name\":\"p\"}]}}}}");
        struct maas_cluster c;
        struct maas_cluster_template t;
        struct maas_machine_template m;
        cJSON *out = NULL;

        (void)state;
        assert_int_equal(maas_cluster_decode(in, &c, NULL), CM_OK);
        assert_string_equal(c.spec.dns_record_addresses->cidr, "10.20.0.0/24");
        assert_string_equal(c.spec.dns_record_addresses->interface, "eth1");
        assert_int_equal(maas_cluster_encode(&c, &out), CM_OK);
        test_assert_same_json(in, out);
        cJSON_Delete(out);
        maas_cluster_release(&c);

        assert_int_equal(maas_cluster_template_decode(tin, &t, NULL), CM_OK);
        assert_string_equal(t.spec.dns_record_addresses->cidr, "fd00:20::/64");
        assert_null(t.spec.dns_record_addresses->interface);
        assert_int_equal(maas_cluster_template_encode(&t, &out), CM_OK);
        test_assert_same_json(tin, out);
        cJSON_Delete(out);
        maas_cluster_template_release(&t);

        assert_int_equal(maas_machine_template_decode(mt, &m, NULL), CM_OK);
        assert_int_equal(m.spec.addresses_from_pools.n, 1);
        assert_string_equal(m.spec.addresses_from_pools.items[0].kind, "K");
        assert_int_equal(maas_machine_template_encode(&m, &out), CM_OK);
        test_assert_same_json(mt, out);
        cJSON_Delete(out);
        maas_machine_template_release(&m);
        cJSON_Delete(in);
        cJSON_Delete(tin);
        cJSON_Delete(mt);
}

static void test_schema__static_fields_type_errors_name_the_path(void **state)
{
        cJSON *in = test_json("{\"spec\":{\"staticIP\":{\"ip\":21,\"cidr\":[],\"gateway\":false,"
                              "\"nameservers\":[\"10.0.0.2\",3],\"interface\":{}},"
                              "\"addressesFromPools\":[{\"apiGroup\":1,\"kind\":null,"
                              "\"name\":[]},\"pool\"]}}");
        cJSON *notobj = test_json("{\"spec\":{\"staticIP\":\"10.0.0.5\","
                                  "\"addressesFromPools\":{}}}");
        cJSON *tmpl = test_json("{\"spec\":{\"template\":{\"spec\":{\"staticIP\":{\"nameservers\":"
                                "\"10.0.0.2\"},\"addressesFromPools\":[{\"name\":5}]}}}}");
        cJSON *cl = test_json("{\"spec\":{\"dnsRecordAddresses\":{\"cidr\":24,\"interface\":1}}}");
        cJSON *clt = test_json("{\"spec\":{\"template\":{\"spec\":{\"dnsRecordAddresses\":[]}}}}");
        static const char *want[] = {
                "spec.staticIP.ip: expected string, got integer",
                "spec.staticIP.cidr: expected string, got array",
                "spec.staticIP.gateway: expected string, got boolean",
                "spec.staticIP.nameservers[1]: expected string, got integer",
                "spec.staticIP.interface: expected string, got object",
                "spec.addressesFromPools[0].apiGroup: expected string, got integer",
                "spec.addressesFromPools[0].name: expected string, got array",
                "spec.addressesFromPools[1]: expected object, got string",
        };
        struct maas_machine m;
        struct maas_machine_template t;
        struct maas_cluster c;
        struct maas_cluster_template ct;
        struct json_errors e;

        (void)state;
        json_errors_init(&e);
        assert_int_equal(maas_machine_decode(in, &m, &e), CM_EINVAL);
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                if (!json_errors_contains(&e, want[i]))
                        fail_msg("missing error: %s (have %s)", want[i],
                                 json_errors_join(&e, " | "));
        assert_int_equal(e.n, sizeof(want) / sizeof(want[0])); /* kind: null is absent */
        json_errors_release(&e);

        json_errors_init(&e);
        assert_int_equal(maas_machine_decode(notobj, &m, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "spec.staticIP: expected object, got string"));
        assert_true(json_errors_contains(&e, "spec.addressesFromPools: expected array, got "
                                             "object"));
        assert_int_equal(maas_machine_template_decode(tmpl, &t, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "spec.template.spec.staticIP.nameservers: expected "
                                             "array, got string"));
        assert_true(json_errors_contains(&e, "spec.template.spec.addressesFromPools[0].name: "
                                             "expected string, got integer"));
        assert_int_equal(maas_cluster_decode(cl, &c, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "spec.dnsRecordAddresses.cidr: expected string, got "
                                             "integer"));
        assert_true(json_errors_contains(&e, "spec.dnsRecordAddresses.interface: expected string, "
                                             "got integer"));
        assert_int_equal(maas_cluster_template_decode(clt, &ct, &e), CM_EINVAL);
        assert_true(json_errors_contains(&e, "spec.template.spec.dnsRecordAddresses: expected "
                                             "object, got array"));
        assert_int_equal(e.n, 7);
        json_errors_release(&e);
        cJSON_Delete(in);
        cJSON_Delete(notobj);
        cJSON_Delete(tmpl);
        cJSON_Delete(cl);
        cJSON_Delete(clt);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_schema__machine_round_trip_keeps_unknown_fields),
                cmocka_unit_test(test_schema__decode_view_reads_the_same_without_a_copy),
                cmocka_unit_test(test_schema__spec_view_ignores_status),
                cmocka_unit_test(test_schema__cluster_round_trip_keeps_unknown_fields),
                cmocka_unit_test(test_schema__machine_template_round_trip),
                cmocka_unit_test(test_schema__cluster_template_round_trip),
                cmocka_unit_test(test_schema__edits_keep_unknown_fields_of_list_entries),
                cmocka_unit_test(test_schema__decode_reports_every_error_with_its_path),
                cmocka_unit_test(test_schema__template_errors_carry_template_path),
                cmocka_unit_test(test_schema__decode_rejects_non_objects),
                cmocka_unit_test(test_schema__error_list_is_capped),
                cmocka_unit_test(test_schema__absent_and_zero_differ),
                cmocka_unit_test(test_schema__new_object_encodes_only_what_is_set),
                cmocka_unit_test(test_schema__status_cleared_is_removed),
                cmocka_unit_test(test_schema__image_split_matches_reference),
                cmocka_unit_test(test_schema__provider_id_format_and_parse),
                cmocka_unit_test(test_schema__condition_transition_time_moves_only_on_flip),
                cmocka_unit_test(test_schema__conditions_sorted_ready_first_paused_last),
                cmocka_unit_test(test_schema__strv_and_strmap_helpers),
                cmocka_unit_test(test_schema__static_ip_and_pools_round_trip),
                cmocka_unit_test(test_schema__static_fields_absent_and_new),
                cmocka_unit_test(test_schema__dns_record_addresses_round_trip),
                cmocka_unit_test(test_schema__static_fields_type_errors_name_the_path),
        };

        return cmocka_run_group_tests_name("schema", tests, NULL, NULL);
}
