/*
 * Integration: a machine list far over the transport's 8 MiB body cap (issue #18: a zone and
 * pool of thousands of machines) against a real maas-sim over loopback. maas_list_machines
 * decodes it as it streams in and returns every machine; the admission inventory refresh
 * (which lists zone by zone and no further) loads them all.
 *
 * 2500 machines of three interfaces each: maas-sim prints about 5.3 KB of JSON per machine,
 * so the one list is 13 MB, over 1.5 times the cap. (The 12 000 would be 58 MB, but
 * maas-sim loads an inventory in quadratic time: 50 s for 12 000 machines in the sanitizer
 * build, 4000 already past maassim_start's 10 s on a loaded machine.)
 *
 * Needs $CAPMAAS_BUILD_DIR/maas-sim and $CAPMAAS_SOURCE_DIR.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "maas_client.h"
#include "maas_inventory.h"
#include "maassim.h"
#include "testutil.h"
#include "xalloc.h"

#define KEY        "ck:tk:secret1"
#define N_MACHINES 2500

struct fx {
        char dir[256];
        char inventory[300];
        struct maassim sim;
        struct maas_config cfg;
};

/* One zone, one pool, N machines of 4-16 CPUs, each with a tag and three interfaces (the
 * last with an address), all in az1. */
static void write_inventory(const char *path)
{
        static const unsigned cpus[] = { 4, 8, 16 };
        FILE *fp = fopen(path, "w");

        assert_non_null(fp);
        fprintf(fp, "zones:\n  - name: az1\npools:\n  - name: capi\ndomains:\n  - name: maas\n"
                    "tags:\n  - name: ssd\nboot_resources:\n  - name: ubuntu/jammy\n"
                    "    type: Synced\n    architecture: amd64/ga-22.04\nmachines:\n");
        for (unsigned i = 0; i < N_MACHINES; i++) {
                unsigned cpu = cpus[i % 3];

                fprintf(fp,
                        "  - system_id: m%05x\n    hostname: node-%05u\n    cpu_count: %u\n"
                        "    memory: %u\n    storage: 256000\n    zone: az1\n    pool: capi\n"
                        "    tags: [ssd]\n    power_type: ipmi\n    power_state: \"off\"\n"
                        "    interfaces:\n",
                        i, i, cpu, cpu * 2048);
                for (unsigned k = 0; k < 3; k++)
                        fprintf(fp,
                                "      - name: eth%u\n        mac: \"52:54:0%u:%02x:%02x:%02x\"\n",
                                k, k, i >> 16 & 255, i >> 8 & 255, i & 255);
                fprintf(fp, "        ip: 10.100.%u.%u\n        cidr: 10.100.0.0/16\n", i >> 8 & 255,
                        (i & 255) + 1);
        }
        assert_int_equal(fclose(fp), 0);
}

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));
        char *err = NULL;

        test_mkdtemp(f->dir, sizeof(f->dir));
        (void)snprintf(f->inventory, sizeof(f->inventory), "%s/inventory.yaml", f->dir);
        write_inventory(f->inventory);
        if (maassim_start(&f->sim, KEY,
                          (const char *const[]){ "--inventory", f->inventory, NULL }) < 0) {
                (void)unlink(f->inventory);
                (void)rmdir(f->dir);
                free(f);
                *state = NULL;
                return -1;
        }
        if (maas_config_parse(f->sim.proc.url, KEY, &f->cfg, &err) < 0) {
                free(err);
                return -1;
        }
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        int st;

        if (!f)
                return -1;
        st = maassim_stop(&f->sim);
        maas_config_release(&f->cfg);
        (void)unlink(f->inventory);
        (void)rmdir(f->dir);
        free(f);
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Every machine once, in MAAS's order, decoded (zone, pool, CPUs, tags). */
static void assert_all_machines(const struct maas_node_list *l)
{
        static const int cpus[] = { 4, 8, 16 };
        char id[24];

        assert_int_equal(l->n, N_MACHINES);
        for (unsigned i = 0; i < N_MACHINES; i++) {
                const struct maas_node *m = &l->items[i];

                (void)snprintf(id, sizeof(id), "m%05x", i);
                if (strcmp(m->system_id, id) != 0)
                        fail_msg("machine %u is %s, not %s", i, m->system_id, id);
                assert_string_equal(m->zone, "az1");
                assert_string_equal(m->pool, "capi");
                assert_int_equal(m->cpu_count, cpus[i % 3]);
                assert_int_equal(m->tags.n, 1);
        }
}

/* The list of the one zone and pool is over the 8 MiB cap as one body: it streams. */
static void test_maas_list_large__one_zone_and_pool_of_2500_machines(void **state)
{
        struct fx *f = *state;
        struct http_transport *t = NULL;
        struct maas_client *mc = NULL;
        struct maas_node_list l = { 0 };
        struct maas_error err = { 0 };
        int r;

        assert_int_equal(
                http_transport_curl_new(&(struct http_transport_opts){ .timeout_ms = 120000 }, &t),
                0);
        assert_int_equal(
                maas_client_new(&(struct maas_client_opts){ .cfg = &f->cfg, .transport = t }, &mc),
                0);
        r = maas_list_machines(mc, &(struct maas_node_filter){ .zone = "az1", .pool = "capi" }, &l,
                               &err);
        if (r != 0)
                fail_msg("maas_list_machines: %s: %s", cm_strerror(r),
                         err.message ? err.message : "");
        assert_int_equal(err.attempts, 1);
        assert_all_machines(&l);
        maas_node_list_release(&l);
        maas_error_release(&err);
        maas_client_free(mc);
        http_transport_free(t);
}

/* The admission inventory loads all of them (no "response body over the size cap"). */
static void test_maas_list_large__inventory_refresh_loads_every_machine(void **state)
{
        struct fx *f = *state;
        struct maas_inventory *inv = NULL;
        struct maas_inventory_snapshot *s;
        enum maas_inv_state st;
        struct maas_inv_fit fit;
        char *detail = NULL;
        int r;

        assert_int_equal(
                maas_inventory_new(&(struct maas_inventory_opts){ .cfg = &f->cfg,
                                                                  .call_timeout_ms = 120000,
                                                                  .no_thread = true },
                                   &inv),
                0);
        r = maas_inventory_refresh(inv);
        s = maas_inventory_acquire(inv, &st, &detail);
        if (r != 0)
                fail_msg("refresh: %s: %s", cm_strerror(r), detail ? detail : "");
        assert_int_equal(st, MAAS_INV_OK);
        assert_int_equal(s->n_machines, N_MACHINES);
        maas_inv_fit(s, &(struct maas_inv_query){ .pool = "capi", .zone = "az1", .min_cpu = 16 },
                     &fit);
        assert_int_equal(fit.candidates, N_MACHINES);
        assert_int_equal(fit.fit, N_MACHINES / 3);
        maas_inventory_snapshot_release(s);
        free(detail);
        maas_inventory_free(inv);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_maas_list_large__one_zone_and_pool_of_2500_machines),
                cmocka_unit_test(test_maas_list_large__inventory_refresh_loads_every_machine),
        };

        return cmocka_run_group_tests_name("maas_list_large", tests, setup, teardown);
}
