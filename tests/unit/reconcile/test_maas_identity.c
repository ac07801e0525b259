/*
 * maas_identity: the pool's backoff after MAAS refused an identity's key, on the fake clock
 * and the fake Kubernetes API of reconcile_world. While it backs off no MAAS call is made and
 * the Secret is read at most every MAAS_IDENT_POLL_MS; a Secret changed meanwhile (another
 * resourceVersion) ends the backoff at once instead of when it runs out (up to 60 s).
 */
#include "../../../reconcile/maas_identity.h"
#include "reconcile_world.h"

#define SECRET_URL CORE_API "/secrets/maas-b"

static void put_secret(struct world *w, const char *key)
{
        char *ep = base64_encode(MAAS_URL, strlen(MAAS_URL));
        char *k = base64_encode(key, strlen(key));

        world_put(w, NULL, SECRET_URL,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"maas-b\",\"namespace\":\"" NS "\"},\"data\":{\"endpoint\":\"%s\","
                            "\"apiKey\":\"%s\"}}",
                            ep, k));
        free(ep);
        free(k);
}

/* One acquire of ns1/maas-b: 0 (the identity put back at once, after noting a 401 for it
 * when refuse) or the failure's code, with its retry in *retry_ms. */
static int acquire(struct world *w, bool refuse, uint64_t *retry_ms, char *rv, size_t rv_len)
{
        struct maas_ident_failure f = { 0 };
        struct maas_ident *id = NULL;
        int err = maas_ident_acquire(w->p->idents, w->w->kube, NS, "maas-b", &id, &f);

        *retry_ms = f.retry_ms;
        if (id && rv)
                snprintf(rv, rv_len, "%s", id->rv);
        if (id && refuse)
                maas_ident_observe(id, CM_EUNAUTHORIZED);
        maas_ident_put(id);
        maas_ident_failure_release(&f);
        return err;
}

static size_t secret_reads(struct world *w)
{
        return requests(&w->kube, "GET", "/secrets/maas-b", NULL);
}

static void test_maas_identity__a_changed_secret_ends_the_backoff(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        uint64_t retry = 0;
        char rv[16] = "", first_rv[16];
        size_t reads;

        (void)state;
        put_secret(w, "ck1:tk1:ts1");
        assert_int_equal(acquire(w, true, &retry, first_rv, sizeof(first_rv)), 0);
        /* refused again at every probe: the backoff doubles up to 16 s */
        for (int i = 0; i < 5; i++) {
                assert_int_equal(acquire(w, false, &retry, NULL, 0), CM_EUNAUTHORIZED);
                clock_fake_advance(&w->clock, retry);
                assert_int_equal(acquire(w, true, &retry, NULL, 0), 0); /* the probe */
        }
        assert_int_equal(acquire(w, false, &retry, NULL, 0), CM_EUNAUTHORIZED);
        assert_true(retry >= 30000);

        /* unchanged: at most one read per poll interval, still refused */
        reads = secret_reads(w);
        clock_fake_advance(&w->clock, MAAS_IDENT_POLL_MS - 1);
        assert_int_equal(acquire(w, false, &retry, NULL, 0), CM_EUNAUTHORIZED);
        assert_int_equal(secret_reads(w), reads);
        clock_fake_advance(&w->clock, 1);
        assert_int_equal(acquire(w, false, &retry, NULL, 0), CM_EUNAUTHORIZED);
        assert_int_equal(secret_reads(w), reads + 1);
        assert_int_equal(acquire(w, false, &retry, NULL, 0), CM_EUNAUTHORIZED);
        assert_int_equal(secret_reads(w), reads + 1);

        /* the key is fixed in the Secret: the next poll builds the new identity */
        put_secret(w, "ck2:tk2:ts2");
        clock_fake_advance(&w->clock, MAAS_IDENT_POLL_MS);
        assert_true(retry > MAAS_IDENT_POLL_MS); /* without the poll it would still wait */
        assert_int_equal(acquire(w, false, &retry, rv, sizeof(rv)), 0);
        assert_string_not_equal(rv, first_rv);
        assert_string_equal(
                rv, json_find_str(world_get(w, SECRET_URL), "metadata", "resourceVersion", NULL));
        assert_int_equal(requests(&w->maas, NULL, NULL, NULL), 0); /* never a MAAS call */
        world_free(w);
}

/* A pass holding ns1/maas-b (0 and *ret), or the failure's code. */
static int hold(struct world *w, struct maas_ident **ret, uint64_t *retry_ms)
{
        struct maas_ident_failure f = { 0 };
        int err = maas_ident_acquire(w->p->idents, w->w->kube, NS, "maas-b", ret, &f);

        *retry_ms = f.retry_ms;
        maas_ident_failure_release(&f);
        return err;
}

/* After a backoff one pass probes MAAS with the refused key; the passes that come meanwhile
 * (the cluster's, each machine's, all requeued for the same moment) get the failure until the
 * probe's call tells, so a wrong key costs one MAAS call per backoff step, not one per pass.
 * A refused probe is the next step; a proven one lets everyone on. */
static void test_maas_identity__one_probe_per_backoff_step(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        struct maas_ident *probe = NULL, *other = NULL;
        uint64_t retry = 0, first;

        (void)state;
        put_secret(w, "ck1:tk1:ts1");
        assert_int_equal(acquire(w, true, &retry, NULL, 0), 0);
        assert_int_equal(acquire(w, false, &retry, NULL, 0), CM_EUNAUTHORIZED);
        first = retry;
        clock_fake_advance(&w->clock, retry);

        assert_int_equal(hold(w, &probe, &retry), 0); /* the probe, its call under way */
        for (int i = 0; i < 3; i++) {
                assert_int_equal(hold(w, &other, &retry), CM_EUNAUTHORIZED);
                assert_null(other);
                assert_true(retry > 0 && retry <= 1000);
        }
        maas_ident_observe(probe, CM_EUNAUTHORIZED); /* refused again */
        maas_ident_put(probe);
        probe = NULL;
        assert_int_equal(hold(w, &other, &retry), CM_EUNAUTHORIZED);
        assert_true(retry > first); /* the next step of the backoff, from now */
        assert_int_equal(hold(w, &other, &retry), CM_EUNAUTHORIZED);

        clock_fake_advance(&w->clock, retry);
        assert_int_equal(hold(w, &probe, &retry), 0);
        assert_int_equal(hold(w, &other, &retry), CM_EUNAUTHORIZED);
        maas_ident_observe(probe, 0); /* MAAS took the key (it was added there meanwhile) */
        for (int i = 0; i < 3; i++) {
                assert_int_equal(hold(w, &other, &retry), 0);
                maas_ident_put(other);
                other = NULL;
        }
        maas_ident_put(probe);
        world_free(w);
}

/* A probe whose pass made no MAAS call (it stopped before one) holds the others back only for
 * its lease: then the next pass probes. */
static void test_maas_identity__a_probe_without_a_call_expires(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        struct maas_ident *probe = NULL, *next = NULL;
        uint64_t retry = 0;

        (void)state;
        put_secret(w, "ck1:tk1:ts1");
        assert_int_equal(acquire(w, true, &retry, NULL, 0), 0);
        assert_int_equal(acquire(w, false, &retry, NULL, 0), CM_EUNAUTHORIZED);
        clock_fake_advance(&w->clock, retry);
        assert_int_equal(hold(w, &probe, &retry), 0);
        maas_ident_put(probe); /* no call made */
        assert_int_equal(hold(w, &next, &retry), CM_EUNAUTHORIZED);
        clock_fake_advance(&w->clock, 11000); /* past any lease (at most 11 s) */
        assert_int_equal(hold(w, &next, &retry), 0);
        assert_int_equal(hold(w, &probe, &retry), CM_EUNAUTHORIZED); /* one probe again */
        maas_ident_put(next);
        world_free(w);
}

/* While a probe is out and silent, the Secret is still read every MAAS_IDENT_POLL_MS: a key
 * fixed meanwhile is used at once, not after the probe's lease. */
static void test_maas_identity__a_fixed_secret_ends_a_probe_wait(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w;
        struct maas_ident *probe = NULL, *next = NULL;
        uint64_t retry = 0;
        char first_rv[16];

        (void)state;
        s.maas_timeout_ms = 10000; /* a lease of 11 s */
        w = world_new(&s);
        put_secret(w, "ck1:tk1:ts1");
        assert_int_equal(acquire(w, true, &retry, first_rv, sizeof(first_rv)), 0);
        assert_int_equal(acquire(w, false, &retry, NULL, 0), CM_EUNAUTHORIZED);
        clock_fake_advance(&w->clock, retry);
        assert_int_equal(hold(w, &probe, &retry), 0); /* its call hangs */
        put_secret(w, "ck2:tk2:ts2");
        assert_int_equal(hold(w, &next, &retry), CM_EUNAUTHORIZED);
        clock_fake_advance(&w->clock, MAAS_IDENT_POLL_MS);
        assert_int_equal(hold(w, &next, &retry), 0);
        assert_string_not_equal(next->rv, first_rv);
        maas_ident_put(next);
        maas_ident_put(probe);
        world_free(w);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_maas_identity__a_changed_secret_ends_the_backoff),
                cmocka_unit_test(test_maas_identity__one_probe_per_backoff_step),
                cmocka_unit_test(test_maas_identity__a_probe_without_a_call_expires),
                cmocka_unit_test(test_maas_identity__a_fixed_secret_ends_a_probe_wait),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
