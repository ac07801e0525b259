/*
 * ctest: concurrency
 * maas_inventories (server/maas_inventories.c): the per-identity MAAS inventories admission
 * and the controllers share, against a kube-sim (the identity Secrets) and a maas-sim, over
 * real loopback sockets, on a test clock for the idle and recheck times: at most
 * --maas-identity-cache-max (8 by default) are kept, the least recently used goes first, one
 * idle for MAAS_INVENTORIES_IDLE_MS is dropped, and a refresh of one is told to the
 * controllers' listener with the identity's namespace and name. With more identities than the
 * limit each still gets its own MAAS's inventory (a second maas-sim with other zones), and
 * a limit above their number keeps every one.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base64.h"
#include "clock.h"
#include "config.h"
#include "kube_client.h"
#include "kubesim.h"
#include "maas_inventories.h"
#include "maas_inventory.h"
#include "maassim.h"
#include "provider.h"
#include "testutil.h"
#include "xalloc.h"

#define KEY "ck-inv:tk-inv:ts-inv"
#define NS  "default"

static struct {
        struct kubesim ks;
        struct maassim ms, ms2; /* ms2: zones site-x1, site-x2 */
        char inv2[64];
        struct kube_client *kc;
        struct config cfg;
        struct maas_inventories *mi;
} E;

static _Atomic uint64_t NOW_MS = 1000000;

static uint64_t fake_now_ms(const struct clock_ops *c)
{
        (void)c;
        return NOW_MS;
}

static int64_t fake_wall_s(const struct clock_ops *c)
{
        (void)c;
        return (int64_t)(NOW_MS / 1000);
}

static const struct clock_ops FAKE = { .now_ms = fake_now_ms, .wall_s = fake_wall_s };

static const char INV2_TEXT[] =
        "zones:\n  - name: site-x1\n  - name: site-x2\n"
        "pools:\n  - name: capi\n"
        "machines:\n"
        "  - system_id: x1\n    hostname: x1\n    cpu_count: 4\n    memory: 8192\n"
        "    zone: site-x1\n    pool: capi\n    architecture: amd64/generic\n";

static int start_second_sim(void)
{
        FILE *f;
        int fd;

        snprintf(E.inv2, sizeof(E.inv2), "/tmp/capmaas-inv2-XXXXXX");
        fd = mkstemp(E.inv2);
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f)
                return -1;
        fputs(INV2_TEXT, f);
        fclose(f);
        return maassim_start(&E.ms2, KEY, (const char *const[]){ "--inventory", E.inv2, NULL });
}

static int setup(void **state)
{
        (void)state;
        if (kubesim_start(&E.ks, NULL) < 0)
                return -1;
        if (maassim_start(&E.ms, KEY, NULL) < 0)
                return -1;
        if (start_second_sim() < 0)
                return -1;
        if (kube_client_new(&(struct kube_client_opts){ .config = &E.ks.cfg }, &E.kc) < 0)
                return -1;
        E.cfg.kubeconfig = E.ks.kubeconfig;
        E.cfg.maas_inventory_interval_ms = 60000;
        return maas_inventories_new_clock(&E.cfg, &FAKE, &E.mi, NULL);
}

static int teardown(void **state)
{
        (void)state;
        E.mi = maas_inventories_free(E.mi);
        kube_client_free(E.kc);
        maassim_stop(&E.ms);
        maassim_stop(&E.ms2);
        unlink(E.inv2);
        kubesim_stop(&E.ks);
        return 0;
}

/* Secret name in NS with sim's endpoint and key. */
static void make_secret_of(const char *name, const struct maassim *sim)
{
        char *ep = base64_encode(sim->proc.url, strlen(sim->proc.url));
        char *k = base64_encode(KEY, strlen(KEY));
        cJSON *o = test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                             "\"%s\"},\"data\":{\"endpoint\":\"%s\",\"apiKey\":\"%s\"}}",
                             name, ep, k);

        assert_int_equal(kube_create(E.kc, &KUBE_RES_SECRETS, NS, o, NULL, NULL), 0);
        cJSON_Delete(o);
        free(ep);
        free(k);
}

static void make_secret(const char *name)
{
        make_secret_of(name, &E.ms);
}

/* Acquires (and releases) Secret name's inventory through the controllers' source. */
static void use(const char *name)
{
        const struct provider_inventory_source *src = maas_inventories_provider_source(E.mi);
        struct maas_inventory *inv = NULL;
        char *why = NULL;
        int err = src->acquire(src->ud, NS, name, &inv, &why);

        if (err)
                fail_msg("acquire %s: %s", name, why ? why : "?");
        assert_non_null(inv);
        src->release(src->ud, inv);
        NOW_MS += 1;
}

/* How many times Secret name was read (GET) since the log was cleared. */
static int reads_of(const char *name)
{
        char *suffix = xasprintf("/secrets/%s", name);
        int n = kubesim_count_requests(
                &E.ks, &(struct kubesim_match){ .method = "GET", .path_suffix = suffix });

        free(suffix);
        return n;
}

static void test_maas_inventories__at_most_eight_the_least_recently_used_goes(void **state)
{
        char name[16];

        (void)state;
        for (int i = 0; i <= MAAS_INVENTORIES_DEFAULT_MAX; i++) {
                snprintf(name, sizeof(name), "id%d", i);
                make_secret(name);
        }
        for (int i = 0; i < MAAS_INVENTORIES_DEFAULT_MAX; i++) {
                snprintf(name, sizeof(name), "id%d", i);
                use(name);
        }
        assert_int_equal(maas_inventories_count(E.mi), MAAS_INVENTORIES_DEFAULT_MAX);
        use("id0"); /* id1 is now the least recently used */
        use("id8");
        assert_int_equal(maas_inventories_count(E.mi), MAAS_INVENTORIES_DEFAULT_MAX);

        /* within the 10 s recheck a kept identity is not read again; id1 was dropped */
        kubesim_clear_requests(&E.ks);
        use("id0");
        use("id2");
        use("id8");
        assert_int_equal(reads_of("id0") + reads_of("id2") + reads_of("id8"), 0);
        use("id1");
        assert_int_equal(reads_of("id1"), 1);
        assert_int_equal(maas_inventories_count(E.mi), MAAS_INVENTORIES_DEFAULT_MAX);
}

/* Whether snapshot s is of E.ms2 (its zones) or of E.ms (the sample's az1). */
static bool of_second(const struct maas_inventory_snapshot *s)
{
        bool x1 = maas_inv_find(s, MAAS_INV_ZONE, "site-x1") >= 0;
        bool az1 = maas_inv_find(s, MAAS_INV_ZONE, "az1") >= 0;

        assert_true(x1 != az1);
        return x1;
}

/* Acquires Secret name's inventory, waits (bounded) for its first listing and checks it is
 * of the MAAS its Secret names: E.ms2 when second, else E.ms. */
static void use_checked(const char *name, bool second)
{
        const struct provider_inventory_source *src = maas_inventories_provider_source(E.mi);
        struct maas_inventory_snapshot *s = NULL;
        struct maas_inventory *inv = NULL;
        enum maas_inv_state st = MAAS_INV_NOT_LOADED;
        long long until = test_now_ms() + 10000;
        char *why = NULL;
        int err = src->acquire(src->ud, NS, name, &inv, &why);

        if (err)
                fail_msg("acquire %s: %s", name, why ? why : "?");
        while ((s = maas_inventory_acquire(inv, &st, NULL)) == NULL || st != MAAS_INV_OK) {
                maas_inventory_snapshot_release(s);
                if (test_now_ms() > until)
                        fail_msg("%s: no inventory loaded (%s)", name, maas_inv_state_name(st));
                nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
        }
        assert_int_equal(of_second(s), second);
        maas_inventory_snapshot_release(s);
        src->release(src->ud, inv);
        NOW_MS += 1;
}

/* 9 identities, the odd ones of the second MAAS, used in turn for 3 rounds with the cache
 * limited to limit; returns the Secret reads of rounds 2 and 3 (within the 10 s recheck:
 * only an identity that was dropped is read again). */
static int nine_in_turn(unsigned limit, const char *prefix)
{
        char name[16];
        int reads = 0;

        E.mi = maas_inventories_free(E.mi);
        E.cfg.maas_identity_cache_max = limit;
        assert_int_equal(maas_inventories_new_clock(&E.cfg, &FAKE, &E.mi, NULL), 0);
        for (int i = 0; i < 9; i++) {
                snprintf(name, sizeof(name), "%s%d", prefix, i);
                make_secret_of(name, i % 2 ? &E.ms2 : &E.ms);
        }
        NOW_MS += MAAS_INVENTORIES_IDLE_MS; /* nothing else is recent */
        for (int round = 0; round < 3; round++) {
                if (round == 1)
                        kubesim_clear_requests(&E.ks);
                for (int i = 0; i < 9; i++) {
                        snprintf(name, sizeof(name), "%s%d", prefix, i);
                        use_checked(name, i % 2);
                }
                assert_int_equal(maas_inventories_count(E.mi), limit < 9 ? limit : 9);
        }
        for (int i = 0; i < 9; i++) {
                snprintf(name, sizeof(name), "%s%d", prefix, i);
                reads += reads_of(name);
        }
        return reads;
}

/* --maas-identity-cache-max 8 with 9 identities in turn: each still gets its own MAAS's
 * inventory, but the caches take turns (every use a read and a rebuild); 16 keeps all 9. */
static void test_maas_inventories__the_limit_is_the_flag(void **state)
{
        (void)state;
        assert_int_equal(nine_in_turn(8, "lim8-"), 18);
        assert_int_equal(nine_in_turn(16, "lim16-"), 0);
        E.cfg.maas_identity_cache_max = 0; /* the default for the tests after this one */
}

static void test_maas_inventories__idle_ones_are_dropped(void **state)
{
        (void)state;
        make_secret("idle-a");
        make_secret("idle-b");
        NOW_MS += MAAS_INVENTORIES_IDLE_MS; /* the previous test's are idle long enough */
        use("idle-a");
        assert_int_equal(maas_inventories_count(E.mi), 1);
        use("idle-b");
        assert_int_equal(maas_inventories_count(E.mi), 2);
        NOW_MS += MAAS_INVENTORIES_IDLE_MS - 10;
        use("idle-b"); /* used again in time: kept; idle-a stays too, not yet idle long enough */
        assert_int_equal(maas_inventories_count(E.mi), 2);
        NOW_MS += 20; /* idle-a: unused for longer than the idle time */
        use("idle-b");
        assert_int_equal(maas_inventories_count(E.mi), 1);
        NOW_MS += MAAS_INVENTORIES_IDLE_MS;
        kubesim_clear_requests(&E.ks);
        use("idle-b"); /* dropped at this lookup, and built again */
        assert_int_equal(reads_of("idle-b"), 1);
        assert_int_equal(maas_inventories_count(E.mi), 1);
}

/* One lookup of Secret name through the controllers' source that must fail: its message. */
static char *use_failing(const char *name)
{
        const struct provider_inventory_source *src = maas_inventories_provider_source(E.mi);
        struct maas_inventory *inv = NULL;
        char *why = NULL;

        assert_int_not_equal(src->acquire(src->ud, NS, name, &inv, &why), 0);
        assert_null(inv);
        assert_non_null(why);
        return why;
}

/* A missing (then malformed) Secret is read once per 5 s however many lookups ask (each
 * template pass and labelled admission is one), each answered with why; once it is fixed,
 * the next read after those 5 s builds its inventory. */
static void test_maas_inventories__a_missing_secret_is_remembered(void **state)
{
        cJSON *o;
        char *why;

        (void)state;
        kubesim_clear_requests(&E.ks);
        for (int i = 0; i < 20; i++) {
                why = use_failing("absent");
                assert_non_null(strstr(why, "Secret " NS "/absent"));
                assert_non_null(strstr(why, "does not exist"));
                free(why);
                NOW_MS += 100; /* 2 s in all */
        }
        assert_int_equal(reads_of("absent"), 1);
        NOW_MS += 3000;
        free(use_failing("absent"));
        assert_int_equal(reads_of("absent"), 2);

        /* there now, but malformed: remembered as well, with the field */
        o = test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                      "\"absent\"},\"stringData\":{\"endpoint\":\"http://127.0.0.1:9/MAAS\"}}");
        assert_int_equal(kube_create(E.kc, &KUBE_RES_SECRETS, NS, o, NULL, NULL), 0);
        cJSON_Delete(o);
        NOW_MS += 5000;
        for (int i = 0; i < 5; i++) {
                why = use_failing("absent");
                assert_non_null(strstr(why, "apiKey"));
                free(why);
        }
        assert_int_equal(reads_of("absent"), 3);

        /* fixed: read again after the 5 s, and built */
        assert_int_equal(kube_delete(E.kc, &KUBE_RES_SECRETS, NS, "absent", NULL, NULL), 0);
        make_secret("absent");
        NOW_MS += 5000;
        use("absent");
        assert_int_equal(reads_of("absent"), 4);
}

static struct {
        pthread_mutex_t lock;
        char seen[128];
} HEARD = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void on_refresh(void *arg,
                       const char *ns,
                       const char *secret,
                       const struct maas_inventory_snapshot *snap)
{
        (void)arg;
        (void)snap;
        pthread_mutex_lock(&HEARD.lock);
        snprintf(HEARD.seen, sizeof(HEARD.seen), "%s/%s", ns, secret);
        pthread_mutex_unlock(&HEARD.lock);
}

static bool heard(const void *arg)
{
        bool yes;

        pthread_mutex_lock(&HEARD.lock);
        yes = strcmp(HEARD.seen, arg) == 0;
        pthread_mutex_unlock(&HEARD.lock);
        return yes;
}

/* Polls heard(want) for up to 10 s. */
static bool heard_within(const char *want)
{
        long long until = test_now_ms() + 10000;

        while (!heard(want)) {
                if (test_now_ms() > until)
                        return false;
                nanosleep(&(struct timespec){ .tv_nsec = 20000000 }, NULL);
        }
        return true;
}

static void test_maas_inventories__refreshes_are_told_with_the_identity(void **state)
{
        const struct provider_inventory_source *src = maas_inventories_provider_source(E.mi);

        (void)state;
        src->set_listener(src->ud, on_refresh, NULL);
        make_secret("told");
        use("told"); /* its first refresh starts at once */
        assert_true(heard_within(NS "/told"));
        src->set_listener(src->ud, NULL, NULL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_maas_inventories__at_most_eight_the_least_recently_used_goes),
                cmocka_unit_test(test_maas_inventories__idle_ones_are_dropped),
                cmocka_unit_test(test_maas_inventories__the_limit_is_the_flag),
                cmocka_unit_test(test_maas_inventories__a_missing_secret_is_remembered),
                cmocka_unit_test(test_maas_inventories__refreshes_are_told_with_the_identity),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
