/*
 * Admission of spec.lxd (docs/lxd.md): the value rules (fields capmaas does not implement
 * denied, never ignored; MAAS's 1024 MiB minimum for a VM) and the MAAS checks against a
 * snapshot's VM hosts built by hand: a pool or zone without a host carrying every tag is
 * denied naming the hosts; a VM no host could ever hold is denied naming the field and what
 * the largest lacks; a VM that fits only once others go gets a warning; a MAAS without VM
 * hosts is denied; a snapshot that has not listed them asks for them and a fresh read. A VM's
 * tags are its host's, so they are not looked up among MAAS's machine tags.
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
#include "admission.h"
#include "maas_inventory.h"
#include "maas_pods.h"

#define S(lit) ((char *)(uintptr_t)(lit))

static void assert_only_error(struct field_errors *fe, const char *text)
{
        char *t;

        assert_int_equal(fe->n, 1);
        t = field_error_text(&fe->items[0]);
        assert_string_equal(t, text);
        free(t);
        field_errors_release(fe);
        field_errors_init(fe);
}

struct vm {
        struct maas_machine_spec sp;
        struct maas_machine_lxd lxd;
        struct maas_vm_config vc;
};

static void vm_init(struct vm *v, int64_t cpu, int64_t mem, int64_t disk)
{
        *v = (struct vm){ 0 };
        v->sp.has_min_cpu = v->sp.has_min_memory = true;
        v->sp.min_cpu = cpu;
        v->sp.min_memory = mem;
        v->sp.resource_pool = S("capi");
        v->sp.lxd = &v->lxd;
        v->lxd.enabled = v->lxd.has_enabled = true;
        v->lxd.vm_config = &v->vc;
        v->vc.disk_size = disk;
        v->vc.has_disk_size = true;
}

static void test_validate_lxd__unimplemented_fields_are_denied(void **state)
{
        struct schema_strmap_entry mode = { S("eth0"), S("static") };
        struct field_errors fe;
        struct vm v;

        (void)state;
        field_errors_init(&fe);
        vm_init(&v, 2, 4096, 20);
        validate_machine_lxd(&v.sp, "spec", &fe);
        assert_int_equal(fe.n, 0);
        v.vc.network = S("br0");
        validate_machine_lxd(&v.sp, "spec", &fe);
        assert_only_error(&fe, "spec.lxd.vmConfig.network: Forbidden: not supported: capmaas "
                               "composes VMs on the VM host's default network");
        v.vc.network = NULL;
        v.vc.interface_link_modes = (struct schema_strmap){ &mode, 1, true };
        validate_machine_lxd(&v.sp, "spec", &fe);
        assert_only_error(&fe, "spec.lxd.vmConfig.interfaceLinkModes: Forbidden: not supported: "
                               "the VM's interfaces are configured as MAAS commissions them");
        v.vc.interface_link_modes = (struct schema_strmap){ 0 };
        v.vc.has_auto_start = true;
        v.vc.auto_start = true;
        validate_machine_lxd(&v.sp, "spec", &fe);
        assert_int_equal(fe.n, 0);
        v.vc.auto_start = false;
        validate_machine_lxd(&v.sp, "spec.template.spec", &fe);
        assert_only_error(&fe, "spec.template.spec.lxd.vmConfig.autoStart: Forbidden: not "
                               "supported: MAAS starts a composed VM to commission and deploy it");
        field_errors_release(&fe);
}

static void test_validate_lxd__value_rules(void **state)
{
        struct field_errors fe;
        struct vm v;

        (void)state;
        field_errors_init(&fe);
        vm_init(&v, 2, 512, 20);
        validate_machine_lxd(&v.sp, "spec", &fe);
        assert_only_error(&fe, "spec.minMemory: Invalid value: 512: MAAS composes VMs of at least "
                               "1024 MiB");
        v.lxd.enabled = false; /* bare metal: no such minimum */
        validate_machine_lxd(&v.sp, "spec", &fe);
        assert_int_equal(fe.n, 0);
        vm_init(&v, 2, 4096, 0);
        validate_machine_lxd(&v.sp, "spec", &fe);
        assert_only_error(&fe, "spec.lxd.vmConfig.diskSize: Invalid value: 0: must be greater "
                               "than or equal to 1");
        vm_init(&v, 2, 4096, 20);
        v.vc.storage_pool = S("fast pool");
        validate_machine_lxd(&v.sp, "spec", &fe);
        assert_only_error(&fe, "spec.lxd.vmConfig.storagePool: Invalid value: \"fast pool\": must "
                               "be a MAAS name: letters, digits, '-' and '_' only");
        field_errors_release(&fe);
}

/* Host a: pool capi, zone az1, tag virtual, 4 cores at ratio 2 with 6 used, 8 GiB with
 * 2 GiB used, 100 GB default pool. Host b: pool other. */
static struct maas_inventory_snapshot *snap_with(enum maas_inv_pods st)
{
        static char *virt[] = { S("virtual") };
        static struct maas_storage_pool sp_a = { S("default"), INT64_C(100000000000), 0, true };
        static struct maas_storage_pool sp_b = { S("default"), INT64_C(100000000000), 0, true };
        static struct maas_pod hosts[2];
        struct maas_named pools[] = { { 1, S("capi"), S("") }, { 2, S("other"), S("") } };
        struct maas_named zones[] = { { 1, S("az1"), S("") }, { 2, S("az2"), S("") } };
        struct maas_inventory_lists l = { .zones = { zones, 2 },
                                          .pools = { pools, 2 },
                                          .pods_state = st };

        hosts[0] = (struct maas_pod){ .id = 1,
                                      .name = S("a"),
                                      .zone = S("az1"),
                                      .pool = S("capi"),
                                      .tags = { virt, 1 },
                                      .cores_total = 4,
                                      .cores_used = 6,
                                      .memory_total = 8192,
                                      .memory_used = 2048,
                                      .cpu_ratio = 2,
                                      .host_system_id = S("h-a"),
                                      .memory_ratio = 1,
                                      .storage_pools = &sp_a,
                                      .n_storage_pools = 1 };
        hosts[1] = hosts[0];
        hosts[1].id = 2;
        hosts[1].name = S("b");
        hosts[1].pool = S("other");
        hosts[1].tags = (struct maas_strv){ 0 };
        hosts[1].storage_pools = &sp_b;
        if (st == MAAS_INV_PODS_OK)
                l.pods = (struct maas_pod_list){ hosts, 2 };
        return maas_inventory_snapshot_build(&l, 0);
}

static void check(struct maas_inventory_snapshot *s,
                  const struct vm *v,
                  struct field_errors *fe,
                  struct admission_response *warn,
                  bool *ret_miss,
                  bool *ret_want)
{
        struct maas_check c = { .path = "spec", .s = s, .fe = fe, .warn = warn };

        maas_check_machine_spec(&v->sp, &c);
        *ret_miss = c.miss;
        *ret_want = c.want_pods;
}

static void test_validate_lxd__checked_against_the_vm_hosts(void **state)
{
        struct maas_inventory_snapshot *s = snap_with(MAAS_INV_PODS_OK);
        struct admission_response warn = { 0 };
        const char *virt[] = { "virtual" };
        struct field_errors fe;
        bool miss, want;
        struct vm v;

        (void)state;
        field_errors_init(&fe);
        vm_init(&v, 2, 4096, 20);
        v.sp.tags = (struct schema_strv){ .items = (char **)(uintptr_t)virt, .n = 1 };
        check(s, &v, &fe, &warn, &miss, &want);
        assert_int_equal(fe.n, 0); /* "virtual" is no MAAS tag: a host's tag is enough */
        assert_int_equal(warn.n_warnings, 0);
        assert_false(miss);
        assert_false(want);

        v.sp.failure_domain = S("az2");
        check(s, &v, &fe, &warn, &miss, &want);
        assert_true(miss); /* a host registered since may change it: a fresh read decides */
        assert_only_error(&fe, "spec.lxd.enabled: Invalid value: true: no MAAS VM host in pool "
                               "capi, in zone az2, with tags virtual (VM hosts: a (pool capi, zone "
                               "az1, tags virtual), b (pool other, zone az1))");
        v.sp.failure_domain = NULL;
        v.sp.exclude_tags = (struct schema_strv){ .items = (char **)(uintptr_t)virt, .n = 1 };
        v.sp.tags = (struct schema_strv){ 0 };
        check(s, &v, &fe, &warn, &miss, &want);
        assert_only_error(&fe, "spec.lxd.enabled: Invalid value: true: no MAAS VM host in pool "
                               "capi, without tags virtual (VM hosts: a (pool capi, zone az1, tags "
                               "virtual), b (pool other, zone az1))");
        v.sp.exclude_tags = (struct schema_strv){ 0 };
        v.sp.parent = S("h-elsewhere");
        check(s, &v, &fe, &warn, &miss, &want);
        assert_only_error(&fe, "spec.lxd.enabled: Invalid value: true: no MAAS VM host in pool "
                               "capi, on machine h-elsewhere (VM hosts: a (pool capi, zone az1, "
                               "tags virtual), b (pool other, zone az1))");
        v.sp.parent = S("h-a");
        check(s, &v, &fe, &warn, &miss, &want);
        assert_int_equal(fe.n, 0);
        v.sp.parent = NULL;

        vm_init(&v, 9, 4096, 20); /* 8 cores at most, even empty */
        check(s, &v, &fe, &warn, &miss, &want);
        assert_only_error(
                &fe,
                "spec.minCPU: Invalid value: 9: no MAAS VM host could ever compose this VM: the "
                "largest candidate, a, lacks cores (8 free, 9 wanted) even when "
                "empty");
        vm_init(&v, 2, 4096, 200);
        check(s, &v, &fe, &warn, &miss, &want);
        assert_only_error(&fe, "spec.lxd.vmConfig.diskSize: Invalid value: 200: no MAAS VM host "
                               "could ever compose this VM: the largest candidate, a, lacks "
                               "storage (100 GB free in "
                               "its default pool, 200 wanted) even when empty");

        vm_init(&v, 4, 4096, 20); /* fits a when empty; 2 cores free now */
        check(s, &v, &fe, &warn, &miss, &want);
        assert_int_equal(fe.n, 0);
        assert_int_equal(warn.n_warnings, 1);
        assert_string_equal(warn.warnings[0], "spec: no MAAS VM host has room for this VM now: "
                                              "the closest, a, lacks cores (2 free, 4 wanted)");
        admission_response_release(&warn);
        maas_inventory_snapshot_release(s);
        field_errors_release(&fe);
}

static void test_validate_lxd__without_the_hosts_listed_or_with_none(void **state)
{
        struct maas_inventory_snapshot *s = snap_with(MAAS_INV_PODS_UNKNOWN);
        struct admission_response warn = { 0 };
        struct field_errors fe;
        bool miss, want;
        struct vm v;

        (void)state;
        field_errors_init(&fe);
        vm_init(&v, 2, 4096, 20);
        check(s, &v, &fe, &warn, &miss, &want);
        assert_int_equal(fe.n, 0);
        assert_true(want); /* asks the inventory for them, and a fresh read */
        assert_true(miss);
        maas_inventory_snapshot_release(s);

        s = snap_with(MAAS_INV_PODS_NONE);
        check(s, &v, &fe, &warn, &miss, &want);
        assert_only_error(&fe, "spec.lxd.enabled: Invalid value: true: this MAAS has no VM hosts "
                               "(MAAS 3.8 removed them)");
        maas_inventory_snapshot_release(s);

        s = snap_with(MAAS_INV_PODS_FAILED);
        check(s, &v, &fe, &warn, &miss, &want);
        assert_int_equal(fe.n, 0);
        assert_int_equal(warn.n_warnings, 1);
        assert_string_equal(warn.warnings[0],
                            "spec.lxd: MAAS's VM hosts could not be listed; not checked");
        admission_response_release(&warn);
        maas_inventory_snapshot_release(s);

        /* bare metal never asks for VM hosts */
        s = snap_with(MAAS_INV_PODS_UNKNOWN);
        v.lxd.enabled = false;
        warn = (struct admission_response){ 0 };
        check(s, &v, &fe, &warn, &miss, &want);
        assert_false(want);
        admission_response_release(&warn);
        maas_inventory_snapshot_release(s);
        field_errors_release(&fe);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_validate_lxd__unimplemented_fields_are_denied),
                cmocka_unit_test(test_validate_lxd__value_rules),
                cmocka_unit_test(test_validate_lxd__checked_against_the_vm_hosts),
                cmocka_unit_test(test_validate_lxd__without_the_hosts_listed_or_with_none),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
