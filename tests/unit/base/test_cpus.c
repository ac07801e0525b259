/* cpus: cpu.max parsing, the tightest quota over a cgroup and its ancestors (v2 and v1
 * layouts built in a temporary directory as a container runtime writes them), and the
 * affinity mask as taskset would narrow it. */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "cpus.h"
#include "err.h"
#include "testutil.h"

static char root[256];

static int setup(void **state)
{
        (void)state;
        test_mkdtemp(root, sizeof root);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        return test_sh("rm -rf '%s'", root) == 0 ? 0 : -1;
}

/* Writes text to root/rel, making the directories on the way. */
static void put(const char *rel, const char *text)
{
        char path[512];
        FILE *f;

        assert_int_equal(test_sh("mkdir -p \"$(dirname '%s/%s')\"", root, rel), 0);
        snprintf(path, sizeof path, "%s/%s", root, rel);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
}

static unsigned parse_ok(const char *text)
{
        unsigned n = 12345;

        assert_int_equal(cpus_parse_cpu_max(text, &n), 0);
        return n;
}

static void test_cpus__cpu_max_rounds_the_quota_up(void **state)
{
        (void)state;
        assert_int_equal(parse_ok("max 100000\n"), 0);
        assert_int_equal(parse_ok("100000 100000\n"), 1);
        assert_int_equal(parse_ok("50000 100000"), 1);
        assert_int_equal(parse_ok("150000 100000\n"), 2);
        assert_int_equal(parse_ok("400000 100000\n"), 4);
        assert_int_equal(parse_ok("1000 1000000\n"), 1);
}

static void test_cpus__cpu_max_rejects_malformed_text(void **state)
{
        static const char *const bad[] = {
                "",
                "\n",
                "max",
                "max\n",
                "100000",
                "abc 100000",
                "-5 100000",
                "100000 0",
                "100000  100000",
                "100000 100000 extra",
                " 100000 100000",
                "1.5 100000",
        };
        unsigned n = 77;

        (void)state;
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                assert_int_equal(cpus_parse_cpu_max(bad[i], &n), CM_EINVAL);
                assert_int_equal(n, 77);
        }
}

static void test_cpus__v2_takes_the_tightest_ancestor(void **state)
{
        (void)state;
        put("cpu.max", "max 100000\n");
        put("kubepods.slice/cpu.max", "800000 100000\n");
        put("kubepods.slice/pod1/cpu.max", "150000 100000\n");
        put("kubepods.slice/pod1/ctr/cpu.max", "max 100000\n");
        assert_int_equal(cpus_cgroup_limit(root, "0::/kubepods.slice/pod1/ctr\n"), 2);
        /* a sibling without a limit of its own still sits under kubepods.slice */
        assert_int_equal(cpus_cgroup_limit(root, "0::/kubepods.slice/other\n"), 8);
        put("kubepods.slice/pod1/ctr/cpu.max", "50000 100000\n");
        assert_int_equal(cpus_cgroup_limit(root, "0::/kubepods.slice/pod1/ctr\n"), 1);
}

static void test_cpus__v2_namespaced_container_reads_the_root(void **state)
{
        (void)state;
        put("cpu.max", "300000 100000\n");
        assert_int_equal(cpus_cgroup_limit(root, "0::/\n"), 3);
        put("cpu.max", "max 100000\n");
        assert_int_equal(cpus_cgroup_limit(root, "0::/\n"), 0);
}

static void test_cpus__nothing_readable_means_no_limit(void **state)
{
        (void)state;
        assert_int_equal(cpus_cgroup_limit(root, "0::/no/such/group\n"), 0);
        assert_int_equal(cpus_cgroup_limit(root, ""), 0);
        assert_int_equal(cpus_cgroup_limit(root, "garbage without colons\n"), 0);
        put("cpu.max", "not a cpu.max\n");
        assert_int_equal(cpus_cgroup_limit(root, "0::/\n"), 0);
}

static void test_cpus__v1_reads_the_cpu_controller_only(void **state)
{
        static const char proc[] = "12:memory:/docker/abc\n"
                                   "11:cpuset:/docker/abc\n"
                                   "4:cpu,cpuacct:/docker/abc\n"
                                   "1:name=systemd:/docker/abc\n";

        (void)state;
        /* cpuset and memory directories hold decoys that must be ignored */
        put("cpuset/docker/abc/cpu.cfs_quota_us", "100000\n");
        put("cpuset/docker/abc/cpu.cfs_period_us", "100000\n");
        put("cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
        put("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
        put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
        put("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
        assert_int_equal(cpus_cgroup_limit(root, proc), 0);
        put("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n");
        assert_int_equal(cpus_cgroup_limit(root, proc), 3);
        put("cpu,cpuacct/docker/cpu.cfs_quota_us", "100000\n");
        put("cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
        assert_int_equal(cpus_cgroup_limit(root, proc), 1);
}

static void test_cpus__affinity_follows_the_mask(void **state)
{
        cpu_set_t all;
        unsigned n;

        (void)state;
        n = cpus_affinity();
        assert_true(cpus_usable() >= 1 && cpus_usable() <= n);
        assert_int_equal(test_pin_to_one_cpu(&all), 0);
        assert_int_equal(n, (unsigned)CPU_COUNT(&all));
        assert_int_equal(cpus_affinity(), 1);
        assert_int_equal(cpus_usable(), 1);
        assert_int_equal(test_restore_cpus(&all), 0);
        assert_int_equal(cpus_affinity(), n);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cpus__cpu_max_rounds_the_quota_up),
                cmocka_unit_test(test_cpus__cpu_max_rejects_malformed_text),
                cmocka_unit_test_setup_teardown(test_cpus__v2_takes_the_tightest_ancestor, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_cpus__v2_namespaced_container_reads_the_root,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_cpus__nothing_readable_means_no_limit, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_cpus__v1_reads_the_cpu_controller_only, setup,
                                                teardown),
                cmocka_unit_test(test_cpus__affinity_follows_the_mask),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
