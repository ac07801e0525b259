/*
 * maasmachinetemplate: the status a MaasMachineTemplate gets from a MAAS inventory snapshot
 * for Cluster API's autoscaling from zero (capacity, nodeInfo, CapacityKnown), the quantity
 * and architecture spellings the cluster autoscaler reads, and that a second pass on the same
 * inventory changes nothing (so nothing is written).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../reconcile/maasmachinetemplate.h"
#include "compiler.h"
#include "json.h"

#define S(lit) ((char *)(uintptr_t)(lit))

static struct maas_named N(const char *name) {
        return (struct maas_named){ .id = 1, .name = S(name) };

}

static struct maas_node
node(const char *id,
     int cpu,
     int64_t mem,
     const char *zone,
     char **tags,
     size_t n_tags,
     const char *arch)

{
        return (struct maas_node){ .system_id = S(id),
                                   .status = 4,
                                   .cpu_count = cpu,
                                   .memory_mib = mem,
                                   .zone = S(zone),
                                   .pool = S("capi"),
                                   .architecture = S(arch),
                                   .tags = { .v = tags, .n = n_tags } };
}

static struct maas_inventory_snapshot *sample(void)
{
        static char *ssd[] = { S("ssd") };
        struct maas_named zones[] = { N("az1"), N("az2") };
        struct maas_named pools[] = { N("capi") };
        struct maas_named tags[] = { N("ssd") };
        struct maas_node machines[] = {
                node("a", 16, 8192, "az1", ssd, 1, "amd64/generic"),
                node("b", 8, 32768, "az1", ssd, 1, "amd64/generic"),
                node("c", 4, 4096, "az2", NULL, 0, "arm64/generic"),
        };

        return maas_inventory_snapshot_build(
                &(struct maas_inventory_lists){ .zones = { zones, 2 },
                                                .pools = { pools, 1 },
                                                .tags = { tags, 1 },
                                                .machines = { machines, ARRAY_SIZE(machines) } },
                1000);
}

static const cJSON *cond(const cJSON *status)
{
        const cJSON *c;

        cJSON_ArrayForEach (c, json_find(status, "conditions", NULL))
                if (strcmp(json_find_str(c, "type", NULL), MMT_COND_CAPACITY_KNOWN) == 0)
                        return c;
        return NULL;
}

static void test_maasmachinetemplate__capacity_is_the_smallest_matching_machine(void **state)
{
        struct maas_inventory_snapshot *s = sample();
        char *tags[] = { S("ssd") };
        struct maas_machine_spec sp = { .resource_pool = S("capi"),
                                        .image = S("ubuntu/jammy"),
                                        .min_cpu = 4,
                                        .has_min_cpu = true,
                                        .min_memory = 4096,
                                        .has_min_memory = true,
                                        .tags = { tags, 1, true } };
        cJSON *st = cJSON_CreateObject();
        cJSON *again;

        (void)state;
        maasmachinetemplate_status(&sp, s, st, 3, 1700000000);
        /* a has 16 cores and 8 GiB, b 8 cores and 32 GiB: never more than either */
        assert_string_equal(json_at_str(st, "capacity.cpu"), "8");
        assert_string_equal(json_at_str(st, "capacity.memory"), "8Gi");
        assert_string_equal(json_at_str(st, "nodeInfo.architecture"), "amd64");
        assert_string_equal(json_at_str(st, "nodeInfo.operatingSystem"), "linux");
        assert_string_equal(json_find_str(cond(st), "status", NULL), "True");
        assert_string_equal(json_find_str(cond(st), "reason", NULL), MMT_REASON_MACHINES_MATCH);
        assert_int_equal(json_find(cond(st), "observedGeneration", NULL)->valueint, 3);
        assert_string_equal(json_find_str(cond(st), "lastTransitionTime", NULL),
                            "2023-11-14T22:13:20Z");
        /* the same inventory later: nothing changes, so the pass writes nothing */
        again = cJSON_Duplicate(st, true);
        maasmachinetemplate_status(&sp, s, again, 3, 1700000100);
        assert_true(cJSON_Compare(st, again, true));
        cJSON_Delete(again);
        /* no tag: c (4 cores, 4 GiB, arm64) joins; the architectures differ, so none is said */
        sp.tags = (struct schema_strv){ 0 };
        maasmachinetemplate_status(&sp, s, st, 3, 1700000200);
        assert_string_equal(json_at_str(st, "capacity.cpu"), "4");
        assert_string_equal(json_at_str(st, "capacity.memory"), "4Gi");
        assert_null(json_at(st, "nodeInfo.architecture"));
        assert_string_equal(json_at_str(st, "nodeInfo.operatingSystem"), "linux");
        /* a zone pins it to c */
        sp.failure_domain = S("az2");
        maasmachinetemplate_status(&sp, s, st, 3, 1700000200);
        assert_string_equal(json_at_str(st, "nodeInfo.architecture"), "arm64");
        cJSON_Delete(st);
        maas_inventory_snapshot_release(s);
}

static void test_maasmachinetemplate__no_match_drops_capacity_and_says_why(void **state)
{
        struct maas_inventory_snapshot *s = sample();
        char *tags[] = { S("ssd") };
        struct maas_machine_spec sp = { .resource_pool = S("capi"),
                                        .failure_domain = S("az2"),
                                        .image = S("ubuntu/jammy"),
                                        .min_cpu = 4,
                                        .has_min_cpu = true,
                                        .tags = { tags, 1, true } };
        cJSON *st = cJSON_CreateObject();
        const char *msg;

        (void)state;
        sp.tags.n = 0;
        maasmachinetemplate_status(&sp, s, st, 1, 1700000000);
        assert_non_null(json_at(st, "capacity"));
        sp.tags.n = 1; /* az2 has no ssd machine */
        maasmachinetemplate_status(&sp, s, st, 2, 1700000500);
        assert_null(json_at(st, "capacity"));
        assert_null(json_at(st, "nodeInfo"));
        assert_string_equal(json_find_str(cond(st), "status", NULL), "False");
        assert_string_equal(json_find_str(cond(st), "reason", NULL), MMT_REASON_NO_MATCHING);
        assert_string_equal(json_find_str(cond(st), "lastTransitionTime", NULL),
                            "2023-11-14T22:21:40Z"); /* the status flipped */
        assert_int_equal(json_find(cond(st), "observedGeneration", NULL)->valueint, 2);
        msg = json_find_str(cond(st), "message", NULL);
        assert_non_null(strstr(msg, "pool=capi zone=az2 tags=ssd minCPU=4 minMemory=0MiB"));
        assert_int_equal(cJSON_GetArraySize(json_find(st, "conditions", NULL)), 1);
        cJSON_Delete(st);
        maas_inventory_snapshot_release(s);
}

static void test_maasmachinetemplate__windows_images_run_windows(void **state)
{
        struct maas_inventory_snapshot *s = sample();
        struct maas_machine_spec sp = { .image = S("windows/win2022") };
        cJSON *st = cJSON_CreateObject();

        (void)state;
        maasmachinetemplate_status(&sp, s, st, 1, 1700000000);
        assert_string_equal(json_at_str(st, "nodeInfo.operatingSystem"), "windows");
        cJSON_Delete(st);
        maas_inventory_snapshot_release(s);
}

static void test_maasmachinetemplate__quantities_and_architectures(void **state)
{
        static const struct {
                int64_t mib;
                const char *want;
        } q[] = { { 16384, "16Gi" },  { 1536, "1536Mi" },    { 3072, "3Gi" },
                  { 1048576, "1Ti" }, { 1073741824, "1Pi" }, { 1024LL * 1073741824, "1024Pi" },
                  { 0, "0" },         { 1, "1Mi" } };

        char out[32];

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(q); i++) {
                mmt_memory_quantity(q[i].mib, out, sizeof(out));
                assert_string_equal(out, q[i].want);
        }
        assert_string_equal(mmt_node_architecture("amd64/generic"), "amd64");
        assert_string_equal(mmt_node_architecture("arm64/xgene-uboot"), "arm64");
        assert_string_equal(mmt_node_architecture("ppc64el/generic"), "ppc64le");
        assert_string_equal(mmt_node_architecture("s390x/generic"), "s390x");
        assert_string_equal(mmt_node_architecture("amd64"), "amd64");
        assert_null(mmt_node_architecture("i386/generic"));
        assert_null(mmt_node_architecture("amd64x/generic"));
        assert_null(mmt_node_architecture(""));
        assert_null(mmt_node_architecture(NULL));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(
                        test_maasmachinetemplate__capacity_is_the_smallest_matching_machine),
                cmocka_unit_test(test_maasmachinetemplate__no_match_drops_capacity_and_says_why),
                cmocka_unit_test(test_maasmachinetemplate__windows_images_run_windows),
                cmocka_unit_test(test_maasmachinetemplate__quantities_and_architectures),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
