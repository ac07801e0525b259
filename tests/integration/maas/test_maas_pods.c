/*
 * Integration: the MAAS client's VM host calls (maas_pods.h) against a real maas-sim with two
 * VM hosts: the list with capacity, over-commit ratios and storage pools; compose (the VM
 * unowned and Commissioning, then Ready, in the zone and pool asked for, its share counted
 * as the host's used); MAAS's refusals with MAAS's text (a taken hostname and a small
 * memory as 400 field errors, the over-commit check and a full storage pool as 503) and a
 * compose never repeated after one; delete (204, the host's capacity back, then 404).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "err.h"
#include "maas_client.h"
#include "maas_pods.h"
#include "maassim.h"
#include "testutil.h"
#include "xalloc.h"

#define ADMIN_KEY "ck:tk:secret1"

/* Two hosts in pool capi: a (az1, 4 cores at a ratio of 2, 8 GiB, 100 GB), b (az2). */
#define HOSTS                                                                         \
        "[{\"name\":\"a\",\"zone\":\"az1\",\"pool\":\"capi\",\"tags\":[\"virtual\"]," \
        "\"cores\":4,\"cpu_over_commit_ratio\":2,\"memory\":8192,"                    \
        "\"storage_pools\":[{\"name\":\"default\",\"size_gb\":100,\"default\":true}," \
        "{\"name\":\"fast\",\"size_gb\":10}]},"                                       \
        "{\"name\":\"b\",\"zone\":\"az2\",\"pool\":\"capi\",\"cores\":2,\"memory\":4096}]"

struct fx {
        struct maassim sim;
        struct maas_config cfg;
        struct http_transport *t;
        struct maas_client *mc;
};

static void no_sleep(void *ud, uint64_t ms)
{
        (void)ud;
        (void)ms;
}

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));
        char *err = NULL;
        cJSON *r;

        if (maassim_start(&f->sim, ADMIN_KEY,
                          (const char *const[]){ "--commission-seconds", "0.2", NULL }) < 0) {
                free(f);
                return -1;
        }
        r = maassim_call(&f->sim, "POST", "pods", HOSTS);
        cJSON_Delete(r);
        if (maas_config_parse(f->sim.proc.url, ADMIN_KEY, &f->cfg, &err) < 0 ||
            http_transport_curl_new(&(struct http_transport_opts){ .timeout_ms = 5000 }, &f->t) <
                    0 ||
            maas_client_new(&(struct maas_client_opts){ .cfg = &f->cfg,
                                                        .transport = f->t,
                                                        .sleep_ms = no_sleep },
                            &f->mc) < 0)
                return -1;
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        int st;

        maas_client_free(f->mc);
        http_transport_free(f->t);
        maas_config_release(&f->cfg);
        st = maassim_stop(&f->sim);
        free(f);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int count_op(struct fx *f, const char *op)
{
        cJSON *doc = maassim_call(&f->sim, "GET", "requests", NULL);
        const cJSON *e;
        int n = 0;

        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(doc, "requests")) {
                const cJSON *o = cJSON_GetObjectItemCaseSensitive(e, "op");

                n += cJSON_IsString(o) && strcmp(o->valuestring, op) == 0;
        }
        cJSON_Delete(doc);
        return n;
}

static void list(struct fx *f, struct maas_pod_list *l)
{
        struct maas_error me = { 0 };

        assert_int_equal(maas_list_pods(f->mc, l, &me), 0);
        assert_int_equal(l->n, 2);
        maas_error_release(&me);
}

static char *compose(struct fx *f, const struct maas_pod *h, const char *hostname, int64_t cores)
{
        struct maas_compose_opts o = { .cores = cores,
                                       .memory_mib = 2048,
                                       .disk_gb = 20,
                                       .hostname = hostname,
                                       .zone_id = h->zone_id,
                                       .pool_id = h->pool_id };
        struct maas_error me = { 0 };
        char *sid = NULL;

        assert_int_equal(maas_compose(f->mc, h->id, &o, &sid, &me), 0);
        maas_error_release(&me);
        assert_non_null(sid);
        return sid;
}

static void wait_status(struct fx *f, const char *sid, const char *want, struct maas_node *ret)
{
        struct timespec pause = { .tv_nsec = 20 * 1000000L };

        for (int i = 0; i < 250; i++) {
                struct maas_node m = { 0 };

                assert_int_equal(maas_get_machine(f->mc, sid, &m, NULL), 0);
                if (strcmp(m.status_name, want) == 0) {
                        *ret = m;
                        return;
                }
                maas_node_release(&m);
                nanosleep(&pause, NULL);
        }
        fail_msg("machine %s never reached %s", sid, want);
}

static void test_maas_pods__lists_the_hosts_with_capacity_and_ratios(void **state)
{
        struct fx *f = *state;
        struct maas_pod_list l = { 0 };
        const struct maas_pod *a;

        list(f, &l);
        a = &l.items[0];
        assert_string_equal(a->name, "a");
        assert_string_equal(a->type, "lxd");
        assert_string_equal(a->zone, "az1");
        assert_string_equal(a->pool, "capi");
        assert_int_equal(a->tags.n, 1);
        assert_int_equal(a->cores_total, 4);
        assert_int_equal(a->cores_used, 0);
        assert_true(a->cpu_ratio == 2.0);
        assert_true(a->memory_ratio == 1.0);
        assert_int_equal(a->n_storage_pools, 2);
        assert_true(a->storage_pools[0].is_default);
        assert_int_equal(a->storage_pools[0].total, INT64_C(100000000000));
        assert_string_equal(l.items[1].zone, "az2");
        maas_pod_list_release(&l);
}

static void test_maas_pods__compose_makes_an_unowned_vm_that_commissions(void **state)
{
        struct fx *f = *state;
        struct maas_pod_list l = { 0 }, after = { 0 };
        struct maas_node m = { 0 };
        char *sid;

        list(f, &l);
        sid = compose(f, &l.items[0], "vm-one", 3);
        assert_int_equal(maas_get_machine(f->mc, sid, &m, NULL), 0);
        assert_string_equal(m.hostname, "vm-one");
        assert_string_equal(m.power_type, "lxd");
        assert_null(m.owner); /* MAAS: a composed machine has no owner until allocated */
        assert_string_equal(m.zone, "az1"); /* the zone asked for (MAAS's default otherwise) */
        assert_string_equal(m.pool, "capi");
        assert_int_equal(m.cpu_count, 3);
        assert_int_equal(m.memory_mib, 2048);
        maas_node_release(&m);
        wait_status(f, sid, "Ready", &m);
        maas_node_release(&m);
        /* allocatable by system id, as capmaas then does */
        assert_int_equal(maas_allocate(f->mc,
                                       &(struct maas_allocate_opts){ .system_id = sid,
                                                                     .agent_name = "uid-vm" },
                                       &m, NULL),
                         0);
        assert_string_equal(m.status_name, "Allocated");
        maas_node_release(&m);
        list(f, &after);
        assert_int_equal(after.items[0].cores_used, 3);
        assert_int_equal(after.items[0].memory_used, 2048);
        assert_int_equal(after.items[0].storage_pools[0].used, INT64_C(20000000000));
        assert_int_equal(after.items[1].cores_used, 0);
        maas_pod_list_release(&after);
        maas_pod_list_release(&l);
        free(sid);
}

static void test_maas_pods__refusals_keep_maas_text_and_are_not_repeated(void **state)
{
        struct fx *f = *state;
        struct maas_pod_list l = { 0 };
        struct maas_error me = { 0 };
        char *sid, *none = NULL;
        struct maas_compose_opts o = { .cores = 6,
                                       .memory_mib = 2048,
                                       .disk_gb = 20,
                                       .hostname = "vm-big",
                                       .zone_id = -1,
                                       .pool_id = -1 };

        list(f, &l);
        sid = compose(f, &l.items[0], "vm-taken", 4);
        /* 4 + 6 > 4 * 2: MAAS's over-commit check, a 503 with its message, sent once */
        assert_int_equal(maas_compose(f->mc, l.items[0].id, &o, &none, &me), CM_ESERVER);
        assert_int_equal(me.http_status, 503);
        assert_string_equal(me.message,
                            "Unable to compose KVM instance in 'a'. CPU overcommit ratio is 2 "
                            "and there are 0 available resources; 6 requested.");
        assert_int_equal(count_op(f, "compose"), 2);
        assert_null(none);
        /* a taken hostname: 400 on the hostname field */
        o.cores = 1;
        o.hostname = "vm-taken";
        assert_int_equal(maas_compose(f->mc, l.items[0].id, &o, &none, &me), CM_EINVAL);
        assert_non_null(cJSON_GetObjectItemCaseSensitive(me.fields, "hostname"));
        assert_string_equal(me.message, "hostname: Node with hostname \"vm-taken\" already exists");
        /* memory below MAAS's minimum */
        o.hostname = "vm-small";
        o.memory_mib = 512;
        assert_int_equal(maas_compose(f->mc, l.items[0].id, &o, &none, &me), CM_EINVAL);
        assert_string_equal(me.message,
                            "memory: Ensure this value is greater than or equal to 1024.");
        /* the named pool is 10 GB */
        o.memory_mib = 1024;
        o.storage_pool = "fast";
        assert_int_equal(maas_compose(f->mc, l.items[0].id, &o, &none, &me), CM_ESERVER);
        assert_string_equal(me.message, "Unable to compose machine because: Not enough storage "
                                        "space on storage pools: fast");
        o.disk_gb = 10;
        maas_error_release(&me);
        assert_int_equal(maas_compose(f->mc, l.items[0].id, &o, &none, &me), 0);
        free(none);
        maas_error_release(&me);
        maas_pod_list_release(&l);
        free(sid);
}

static void test_maas_pods__delete_frees_the_hosts_capacity(void **state)
{
        struct fx *f = *state;
        struct maas_pod_list l = { 0 }, after = { 0 };
        struct maas_node m = { 0 };
        struct maas_error me = { 0 };
        char *sid;

        list(f, &l);
        sid = compose(f, &l.items[1], "vm-b", 2);
        assert_int_equal(maas_delete_machine(f->mc, sid, &me), 0);
        assert_int_equal(maas_get_machine(f->mc, sid, &m, &me), CM_ENOTFOUND);
        assert_int_equal(maas_delete_machine(f->mc, sid, &me), CM_ENOTFOUND);
        list(f, &after);
        assert_int_equal(after.items[1].cores_used, 0);
        assert_int_equal(after.items[1].storage_pools[0].used, 0);
        /* the hostname is free again */
        free(sid);
        sid = compose(f, &l.items[1], "vm-b", 2);
        maas_error_release(&me);
        maas_pod_list_release(&after);
        maas_pod_list_release(&l);
        free(sid);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_maas_pods__lists_the_hosts_with_capacity_and_ratios, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_maas_pods__compose_makes_an_unowned_vm_that_commissions, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_maas_pods__refusals_keep_maas_text_and_are_not_repeated, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(test_maas_pods__delete_frees_the_hosts_capacity,
                                                setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
