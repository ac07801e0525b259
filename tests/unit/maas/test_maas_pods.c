/*
 * MAAS's VM hosts as capmaas reads them (GET pods/'s JSON) and the choice of the host a VM
 * is composed on: MAAS's over-commit rule for cores and memory, storage per pool without
 * over-commit, the zone / pool / every-tag filters, spreading a cluster's VMs (fewest on a
 * host first, then the most room, then list order), and, when nothing fits, the closest
 * host and what it lacks.
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

#include "err.h"
#include "maas_pods.h"

/* One host as MAAS lists it: cores/memory (MiB) total and used, ratios, one default storage
 * pool of total_gb with used_gb used. */
static cJSON *host_json(int id,
                        const char *name,
                        const char *zone,
                        const char *pool,
                        const char *tags_csv,
                        int cores,
                        int cores_used,
                        double cpu_ratio,
                        int memory,
                        int memory_used,
                        double mem_ratio,
                        double total_gb,
                        double used_gb)
{
        char buf[2048];
        char tags[256] = "";
        size_t k = 0;

        for (const char *t = tags_csv; t && *t;) {
                size_t n = strcspn(t, ",");

                k += (size_t)snprintf(tags + k, sizeof(tags) - k, "%s\"%.*s\"", k ? "," : "",
                                      (int)n, t);
                t += n + (t[n] == ',');
        }
        snprintf(buf, sizeof(buf),
                 "{\"id\":%d,\"name\":\"%s\",\"type\":\"lxd\","
                 "\"zone\":{\"name\":\"%s\",\"id\":%d},\"pool\":{\"name\":\"%s\",\"id\":%d},"
                 "\"tags\":[%s],\"host\":{\"system_id\":\"h%d\"},"
                 "\"architectures\":[\"amd64/generic\"],"
                 "\"cpu_over_commit_ratio\":%g,\"memory_over_commit_ratio\":%g,"
                 "\"total\":{\"cores\":%d,\"memory\":%d,\"local_storage\":%.0f},"
                 "\"used\":{\"cores\":%d,\"memory\":%d,\"local_storage\":%.0f},"
                 "\"available\":{\"cores\":%d,\"memory\":%d,\"local_storage\":%.0f},"
                 "\"storage_pools\":[{\"id\":\"p\",\"name\":\"default\",\"type\":\"zfs\","
                 "\"total\":%.0f,\"used\":%.0f,\"available\":%.0f,\"default\":true},"
                 "{\"id\":\"q\",\"name\":\"fast\",\"type\":\"lvm\",\"total\":%.0f,\"used\":0,"
                 "\"available\":%.0f,\"default\":false}]}",
                 id, name, zone, id + 10, pool, id + 20, tags, id, cpu_ratio, mem_ratio, cores,
                 memory, total_gb * 1e9, cores_used, memory_used, used_gb * 1e9, cores - cores_used,
                 memory - memory_used, (total_gb - used_gb) * 1e9, total_gb * 1e9, used_gb * 1e9,
                 (total_gb - used_gb) * 1e9, 10e9, 10e9);
        return cJSON_Parse(buf);
}

static void decode(cJSON *arr, struct maas_pod_list *ret)
{
        assert_int_equal(maas_pod_list_from_json(arr, ret), 0);
        cJSON_Delete(arr);
}

static cJSON *arr_of(cJSON *a, cJSON *b, cJSON *c)
{
        cJSON *arr = cJSON_CreateArray();

        if (a)
                cJSON_AddItemToArray(arr, a);
        if (b)
                cJSON_AddItemToArray(arr, b);
        if (c)
                cJSON_AddItemToArray(arr, c);
        return arr;
}

static struct maas_vm_request req(int64_t cores, int64_t mem, int64_t disk)
{
        return (struct maas_vm_request){ .cores = cores, .memory_mib = mem, .disk_gb = disk };
}

static void test_maas_pods__decodes_what_maas_lists(void **state)
{
        struct maas_pod_list l = { 0 };
        const struct maas_pod *p;

        (void)state;
        decode(arr_of(host_json(7, "lxd-a", "az1", "capi", "virtual,ssd", 16, 4, 2.5, 32768, 1024,
                                1.5, 500, 100),
                      NULL, NULL),
               &l);
        assert_int_equal(l.n, 1);
        p = &l.items[0];
        assert_int_equal(p->id, 7);
        assert_string_equal(p->name, "lxd-a");
        assert_string_equal(p->type, "lxd");
        assert_string_equal(p->zone, "az1");
        assert_int_equal(p->zone_id, 17);
        assert_string_equal(p->pool, "capi");
        assert_int_equal(p->pool_id, 27);
        assert_string_equal(p->host_system_id, "h7");
        assert_int_equal(p->tags.n, 2);
        assert_string_equal(p->tags.v[1], "ssd");
        assert_int_equal(p->architectures.n, 1);
        assert_string_equal(p->architectures.v[0], "amd64/generic");
        assert_int_equal(p->cores_total, 16);
        assert_int_equal(p->cores_used, 4);
        assert_int_equal(p->memory_total, 32768);
        assert_int_equal(p->memory_used, 1024);
        assert_true(p->cpu_ratio == 2.5);
        assert_true(p->memory_ratio == 1.5);
        assert_int_equal(p->n_storage_pools, 2);
        assert_string_equal(p->storage_pools[0].name, "default");
        assert_true(p->storage_pools[0].is_default);
        assert_int_equal(p->storage_pools[0].total, (int64_t)500e9);
        assert_int_equal(p->storage_pools[0].used, (int64_t)100e9);
        assert_false(p->storage_pools[1].is_default);
        maas_pod_list_release(&l);
}

static void test_maas_pods__refuses_a_host_without_id_or_name_and_defaults_ratios(void **state)
{
        struct maas_pod_list l = { 0 };
        cJSON *bad = cJSON_Parse("[{\"name\":\"x\"}]");
        cJSON *bare = cJSON_Parse("[{\"id\":1,\"name\":\"x\",\"host\":{\"system_id\":null}}]");

        (void)state;
        assert_int_equal(maas_pod_list_from_json(bad, &l), CM_EPARSE);
        assert_int_equal(maas_pod_list_from_json(cJSON_GetArrayItem(bare, 0), &l), CM_EPARSE);
        assert_int_equal(maas_pod_list_from_json(bare, &l), 0);
        assert_true(l.items[0].cpu_ratio == 1.0);
        assert_true(l.items[0].memory_ratio == 1.0);
        assert_null(l.items[0].host_system_id);
        assert_null(l.items[0].zone);
        assert_int_equal(l.items[0].zone_id, -1);
        maas_pod_list_release(&l);
        cJSON_Delete(bad);
        cJSON_Delete(bare);
}

/* 4 cores with 6 used at a ratio of 2: 2 free (MAAS: used + wanted <= total * ratio). */
static void test_maas_pods__fits_cores_and_memory_with_over_commit(void **state)
{
        struct maas_pod_list l = { 0 };
        struct maas_pod_choice ch;
        struct maas_vm_request rq;

        (void)state;
        decode(arr_of(host_json(1, "a", "az1", "capi", "", 4, 6, 2.0, 8192, 10240, 1.5, 100, 0),
                      NULL, NULL),
               &l);
        rq = req(2, 2048, 10); /* 12288 * 1.5 = 12288 - 10240 = 2048 free */
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0);
        assert_string_equal(ch.pool, "default");
        rq = req(3, 2048, 10);
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, -1);
        assert_int_equal(ch.closest, 0);
        assert_int_equal(ch.lacks, MAAS_POD_LACKS_CORES);
        assert_int_equal(ch.free_cores, 2);
        rq = req(2, 2049, 10);
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.lacks, MAAS_POD_LACKS_MEMORY);
        assert_int_equal(ch.free_memory, 2048);
        maas_pod_list_release(&l);
}

/* Storage has no over-commit: the default pool's free GB, or the named pool's. */
static void test_maas_pods__fits_the_disk_in_the_default_or_the_named_pool(void **state)
{
        struct maas_pod_list l = { 0 };
        struct maas_pod_choice ch;
        struct maas_vm_request rq;
        char *text;

        (void)state;
        decode(arr_of(host_json(1, "a", "az1", "capi", "", 8, 0, 1, 16384, 0, 1, 100, 70), NULL,
                      NULL),
               &l);
        rq = req(1, 1024, 30);
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0);
        rq = req(1, 1024, 31);
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, -1);
        assert_int_equal(ch.lacks, MAAS_POD_LACKS_STORAGE);
        assert_int_equal(ch.free_disk_gb, 30);
        text = maas_pod_lacks_text(&ch, &rq);
        assert_string_equal(text, "storage (30 GB free in its default pool, 31 wanted)");
        free(text);
        rq.storage_pool = "fast"; /* 10 GB, empty */
        rq.disk_gb = 10;
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0);
        assert_string_equal(ch.pool, "fast");
        rq.storage_pool = "nvme"; /* the host has no such pool */
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, -1);
        assert_int_equal(ch.lacks, MAAS_POD_LACKS_STORAGE);
        maas_pod_list_release(&l);
}

static void test_maas_pods__filters_by_zone_pool_and_every_tag(void **state)
{
        struct maas_pod_list l = { 0 };
        struct maas_pod_choice ch;
        struct maas_vm_request rq = req(1, 1024, 1);
        const char *tags[] = { "virtual", "ssd" };

        (void)state;
        decode(arr_of(host_json(1, "a", "az1", "capi", "virtual", 8, 0, 1, 16384, 0, 1, 100, 0),
                      host_json(2, "b", "az2", "capi", "virtual,ssd", 8, 0, 1, 16384, 0, 1, 100, 0),
                      host_json(3, "c", "az2", "other", "virtual,ssd", 8, 0, 1, 16384, 0, 1, 100,
                                0)),
               &l);
        rq.zone = "az1";
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0);
        assert_int_equal(ch.candidates, 1);
        rq.zone = NULL;
        rq.pool = "other";
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 2);
        rq.pool = "capi";
        rq.tags = tags;
        rq.n_tags = 2; /* a carries only one of them */
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 1);
        assert_int_equal(ch.candidates, 1);
        rq.zone = "az1"; /* a is in az1 but lacks ssd: no candidate at all */
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, -1);
        assert_int_equal(ch.candidates, 0);
        assert_int_equal(ch.closest, -1);
        rq = req(1, 1024, 1);
        rq.not_tags = tags + 1; /* without ssd: only a */
        rq.n_not_tags = 1;
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0);
        assert_int_equal(ch.candidates, 1);
        rq.n_not_tags = 0;
        rq.host_system_id = "h3"; /* the host running on machine h3: c */
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 2);
        assert_int_equal(ch.candidates, 1);
        maas_pod_list_release(&l);
}

/* Fewest of the cluster's VMs first, even on a host with less room; equal counts: the most
 * room relative to the request; equal room: list order (the same inputs, the same host). */
static void test_maas_pods__spreads_a_clusters_vms(void **state)
{
        struct maas_pod_list l = { 0 };
        struct maas_pod_choice ch;
        struct maas_vm_request rq = req(2, 4096, 20);
        size_t counts[3] = { 0, 0, 0 };

        (void)state;
        decode(arr_of(host_json(1, "a", "az1", "capi", "", 8, 0, 1, 16384, 0, 1, 100, 0),
                      host_json(2, "b", "az1", "capi", "", 8, 0, 1, 16384, 0, 1, 100, 0),
                      host_json(3, "c", "az1", "capi", "", 16, 0, 1, 32768, 0, 1, 100, 0)),
               &l);
        rq.counts = counts;
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 2); /* the roomiest */
        counts[2] = 1;
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0); /* a and b equal: the first */
        counts[0] = 1;
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 1);
        counts[1] = 1; /* one each: the roomiest again */
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 2);
        counts[2] = 5; /* c holds more of the cluster: a, though smaller */
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0);
        maas_pod_list_release(&l);
}

/* A host that has no room never wins by spreading. */
static void test_maas_pods__spreading_never_picks_a_full_host(void **state)
{
        struct maas_pod_list l = { 0 };
        struct maas_pod_choice ch;
        struct maas_vm_request rq = req(2, 4096, 20);
        size_t counts[2] = { 3, 0 };

        (void)state;
        decode(arr_of(host_json(1, "a", "az1", "capi", "", 8, 2, 1, 16384, 0, 1, 100, 0),
                      host_json(2, "b", "az1", "capi", "", 8, 7, 1, 16384, 0, 1, 100, 0), NULL),
               &l);
        rq.counts = counts;
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0);
        maas_pod_list_release(&l);
}

/* Nothing fits: the candidate lacking the fewest resources, then the smallest shortfall. */
static void test_maas_pods__names_the_closest_host_and_what_it_lacks(void **state)
{
        struct maas_pod_list l = { 0 };
        struct maas_pod_choice ch;
        struct maas_vm_request rq = req(6, 8192, 20);
        char *text;

        (void)state;
        decode(arr_of(host_json(1, "a", "az1", "capi", "", 4, 2, 1, 4096, 0, 1, 100, 0),
                      host_json(2, "b", "az1", "capi", "", 8, 4, 1, 16384, 0, 1, 100, 0),
                      host_json(3, "c", "az1", "capi", "", 8, 3, 1, 16384, 0, 1, 100, 0)),
               &l);
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, -1);
        assert_int_equal(ch.candidates, 3);
        assert_int_equal(ch.closest, 2); /* c: cores only, 5 of 6 */
        assert_int_equal(ch.lacks, MAAS_POD_LACKS_CORES);
        text = maas_pod_lacks_text(&ch, &rq);
        assert_string_equal(text, "cores (5 free, 6 wanted)");
        free(text);
        rq.memory_mib = 20000; /* every host now lacks memory too: c lacks the least */
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.closest, 2);
        assert_int_equal(ch.lacks, MAAS_POD_LACKS_CORES | MAAS_POD_LACKS_MEMORY);
        text = maas_pod_lacks_text(&ch, &rq);
        assert_string_equal(text,
                            "cores (5 free, 6 wanted), memory (16384 MiB free, 20000 wanted)");
        free(text);
        maas_pod_list_release(&l);
}

/* "amd64" matches the host's "amd64/generic", which compose is then given. */
static void test_maas_pods__matches_the_architecture(void **state)
{
        struct maas_pod_list l = { 0 };
        struct maas_pod_choice ch;
        struct maas_vm_request rq = req(1, 1024, 1);

        (void)state;
        decode(arr_of(host_json(1, "a", "az1", "capi", "", 8, 0, 1, 16384, 0, 1, 100, 0), NULL,
                      NULL),
               &l);
        rq.arch = "amd64";
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, 0);
        assert_string_equal(ch.arch, "amd64/generic");
        rq.arch = "amd64/generic";
        maas_pod_choose(&l, &rq, &ch);
        assert_string_equal(ch.arch, "amd64/generic");
        rq.arch = "arm64";
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.chosen, -1);
        assert_int_equal(ch.candidates, 0);
        rq.arch = "amd";
        maas_pod_choose(&l, &rq, &ch);
        assert_int_equal(ch.candidates, 0);
        rq.arch = NULL;
        maas_pod_choose(&l, &rq, &ch);
        assert_null(ch.arch);
        maas_pod_list_release(&l);
}

static void test_maas_pods__copy_is_deep(void **state)
{
        struct maas_pod_list l = { 0 }, c = { 0 };

        (void)state;
        decode(arr_of(host_json(1, "a", "az1", "capi", "virtual", 8, 0, 1, 16384, 0, 1, 100, 0),
                      NULL, NULL),
               &l);
        maas_pod_list_copy(&l, &c);
        maas_pod_list_release(&l);
        assert_int_equal(c.n, 1);
        assert_string_equal(c.items[0].name, "a");
        assert_string_equal(c.items[0].tags.v[0], "virtual");
        assert_string_equal(c.items[0].storage_pools[1].name, "fast");
        maas_pod_list_release(&c);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_maas_pods__decodes_what_maas_lists),
                cmocka_unit_test(
                        test_maas_pods__refuses_a_host_without_id_or_name_and_defaults_ratios),
                cmocka_unit_test(test_maas_pods__fits_cores_and_memory_with_over_commit),
                cmocka_unit_test(test_maas_pods__fits_the_disk_in_the_default_or_the_named_pool),
                cmocka_unit_test(test_maas_pods__filters_by_zone_pool_and_every_tag),
                cmocka_unit_test(test_maas_pods__spreads_a_clusters_vms),
                cmocka_unit_test(test_maas_pods__spreading_never_picks_a_full_host),
                cmocka_unit_test(test_maas_pods__names_the_closest_host_and_what_it_lacks),
                cmocka_unit_test(test_maas_pods__matches_the_architecture),
                cmocka_unit_test(test_maas_pods__copy_is_deep),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
