/*
 * ctest: concurrency
 * maas_inventories (server/maas_inventories.c): the per-identity MAAS inventories admission
 * and the controllers share, against a kube-sim (the identity Secrets) and a maas-sim, over
 * real loopback sockets, on a test clock for the idle and recheck times: at most
 * MAAS_INVENTORIES_MAX are kept, the least recently used goes first, one idle for
 * MAAS_INVENTORIES_IDLE_MS is dropped, and a refresh of one is told to the controllers'
 * listener with the identity's namespace and name.
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

#include <cmocka.h>

#include "base64.h"
#include "clock.h"
#include "config.h"
#include "kube_client.h"
#include "kubesim.h"
#include "maas_inventories.h"
#include "maassim.h"
#include "provider.h"
#include "testutil.h"
#include "xalloc.h"

#define KEY "ck-inv:tk-inv:ts-inv"
#define NS  "default"

static struct {
        struct kubesim ks;
        struct maassim ms;
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

static int setup(void **state)
{
        (void)state;
        if (kubesim_start(&E.ks, NULL) < 0)
                return -1;
        if (maassim_start(&E.ms, KEY, NULL) < 0)
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
        kubesim_stop(&E.ks);
        return 0;
}

/* Secret name in NS with the maas-sim's endpoint and key. */
static void make_secret(const char *name)
{
        char *ep = base64_encode(E.ms.proc.url, strlen(E.ms.proc.url));
        char *k = base64_encode(KEY, strlen(KEY));
        cJSON *o = test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                             "\"%s\"},\"data\":{\"endpoint\":\"%s\",\"apiKey\":\"%s\"}}",
                             name, ep, k);

        assert_int_equal(kube_create(E.kc, &KUBE_RES_SECRETS, NS, o, NULL, NULL), 0);
        cJSON_Delete(o);
        free(ep);
        free(k);
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
        for (int i = 0; i <= MAAS_INVENTORIES_MAX; i++) {
                snprintf(name, sizeof(name), "id%d", i);
                make_secret(name);
        }
        for (int i = 0; i < MAAS_INVENTORIES_MAX; i++) {
                snprintf(name, sizeof(name), "id%d", i);
                use(name);
        }
        assert_int_equal(maas_inventories_count(E.mi), MAAS_INVENTORIES_MAX);
        use("id0"); /* id1 is now the least recently used */
        use("id8");
        assert_int_equal(maas_inventories_count(E.mi), MAAS_INVENTORIES_MAX);

        /* within the 10 s recheck a kept identity is not read again; id1 was dropped */
        kubesim_clear_requests(&E.ks);
        use("id0");
        use("id2");
        use("id8");
        assert_int_equal(reads_of("id0") + reads_of("id2") + reads_of("id8"), 0);
        use("id1");
        assert_int_equal(reads_of("id1"), 1);
        assert_int_equal(maas_inventories_count(E.mi), MAAS_INVENTORIES_MAX);
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
                cmocka_unit_test(test_maas_inventories__refreshes_are_told_with_the_identity),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
