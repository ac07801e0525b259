/*
 * Integration: leader election (reconcile/leader.c) with two electors in this process
 * against one kube-sim, on a fake clock: exactly one leads; a killed leader (abandoned,
 * no release) is replaced only after the lease duration of fake time; a released lease is
 * taken at once; a conflicting write makes the leader re-read and keep the lease; a
 * foreign holder ends leadership; failing renewals give up after the renew deadline.
 * The electors retry every 10 ms of real time; expiry is judged on the fake clock.
 *
 * Needs $CAPMAAS_BUILD_DIR/kube-sim. ctest: concurrency
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "kubesim.h"
#include "leader.h"
#include "metrics.h"
#include "testutil.h"
#include "xalloc.h"

#define NS       "default"
#define LEASE    "controller-leader-election-capmaas"
#define WAIT_MS  8000
#define RETRY_MS 10

/* --- fixture ----------------------------------------------------------------------------- */

struct elector {
        struct leader *l;
        struct metrics *m;
        atomic_int started;
        atomic_int stopped;
};

struct fx {
        struct kubesim sim;
        struct clock_fake clk;
        struct kube_client *kc; /* the test's own client */
        struct elector e[2];
};

static void on_started(void *arg)
{
        atomic_fetch_add(&((struct elector *)arg)->started, 1);
}

static void on_stopped(void *arg)
{
        atomic_fetch_add(&((struct elector *)arg)->stopped, 1);
}

static void elector_new(struct fx *f, int i, const char *identity)
{
        struct elector *e = &f->e[i];

        assert_int_equal(metrics_new(&e->m), 0);
        assert_int_equal(leader_new(&(struct leader_opts){ .config = &f->sim.cfg,
                                                           .namespace = NS,
                                                           .name = LEASE,
                                                           .identity = identity,
                                                           .retry_ms = RETRY_MS,
                                                           .clock = &f->clk.ops,
                                                           .metrics = e->m,
                                                           .on_started = on_started,
                                                           .on_stopped = on_stopped,
                                                           .arg = e },
                                    &e->l),
                         0);
}

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));

        assert_int_equal(kubesim_start(&f->sim, NULL), 0);
        clock_fake_init(&f->clk, 1000000, 1800000000);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &f->sim.cfg }, &f->kc), 0);
        elector_new(f, 0, "alpha");
        elector_new(f, 1, "bravo");
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        for (int i = 0; i < 2; i++) {
                f->e[i].l = leader_free(f->e[i].l);
                f->e[i].m = metrics_free(f->e[i].m);
        }
        f->kc = kube_client_free(f->kc);
        kubesim_stop(&f->sim);
        free(f);
        return 0;
}

/* --- helpers ----------------------------------------------------------------------------- */

static void nap(void)
{
        struct timespec ts = { 0, 2 * 1000 * 1000 };

        nanosleep(&ts, NULL);
}

/* Waits (bounded) until elector i is (or is not) leading. */
static void wait_leading(struct fx *f, int i, bool want)
{
        for (int n = 0; n < WAIT_MS / 2; n++) {
                if (leader_is_leader(f->e[i].l) == want)
                        return;
                nap();
        }
        fail_msg("elector %d: leading did not become %d", i, want);
}

/* Waits (bounded) until elector i completed n more attempts. */
static void wait_attempts(struct fx *f, int i, uint64_t n)
{
        uint64_t want = leader_attempts(f->e[i].l) + n;

        for (int k = 0; k < WAIT_MS / 2; k++) {
                if (leader_attempts(f->e[i].l) >= want)
                        return;
                nap();
        }
        fail_msg("elector %d made no progress", i);
}

/* Waits (bounded) for a callback counter to reach 1 (callbacks run on the elector thread,
 * just after leader_is_leader() changes). */
static void wait_count(atomic_int *counter, const char *what)
{
        for (int n = 0; n < WAIT_MS / 2; n++) {
                if (atomic_load(counter) > 0)
                        return;
                nap();
        }
        fail_msg("%s was not called", what);
}

static void wait_stopped(struct fx *f, int i)
{
        wait_count(&f->e[i].stopped, "on_stopped");
}

static cJSON *get_lease(struct fx *f)
{
        cJSON *lease = NULL;

        assert_int_equal(kube_get(f->kc, &KUBE_RES_LEASES, NS, LEASE, &lease, NULL), 0);
        return lease;
}

static const char *spec_str(const cJSON *lease, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(lease, "spec"), key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int64_t spec_int(const cJSON *lease, const char *key)
{
        int64_t v = -1;

        assert_int_equal(
                json_get_int64(NULL, cJSON_GetObjectItemCaseSensitive(lease, "spec"), key, &v), 0);
        return v;
}

static void assert_holder(struct fx *f, const char *holder, int64_t transitions)
{
        cJSON *lease = get_lease(f);

        assert_non_null(spec_str(lease, "holderIdentity"));
        assert_string_equal(spec_str(lease, "holderIdentity"), holder);
        assert_int_equal(spec_int(lease, "leaseTransitions"), transitions);
        cJSON_Delete(lease);
}

static void start_both_alpha_first(struct fx *f)
{
        assert_int_equal(leader_start(f->e[0].l), 0);
        wait_leading(f, 0, true);
        assert_int_equal(leader_start(f->e[1].l), 0);
        wait_attempts(f, 1, 3);
}

static bool gauge_is(struct elector *e, int v)
{
        struct buf out;
        char want[128];
        bool ok;

        buf_init(&out, 1 << 20);
        assert_int_equal(metrics_render(e->m, &out), 0);
        snprintf(want, sizeof(want), "leader_election_master_status{name=\"%s\"} %d\n", LEASE, v);
        ok = out.data && strstr(out.data, want) != NULL;
        buf_release(&out);
        return ok;
}

/* A MicroTime: 2027-01-15T08:00:00.000000Z */
static void assert_micro_time(const char *t)
{
        assert_non_null(t);
        assert_int_equal(strlen(t), 27);
        assert_int_equal(t[4], '-');
        assert_int_equal(t[10], 'T');
        assert_int_equal(t[19], '.');
        assert_int_equal(t[26], 'Z');
}

/* --- tests ------------------------------------------------------------------------------- */

static void test_leader__exactly_one_of_two_leads(void **state)
{
        struct fx *f = *state;
        cJSON *lease;
        int leader;

        assert_int_equal(leader_start(f->e[0].l), 0);
        assert_int_equal(leader_start(f->e[1].l), 0);
        for (int n = 0; n < WAIT_MS / 2; n++) {
                if (leader_is_leader(f->e[0].l) || leader_is_leader(f->e[1].l))
                        break;
                nap();
        }
        leader = leader_is_leader(f->e[0].l) ? 0 : 1;
        assert_true(leader_is_leader(f->e[leader].l));
        /* 20 s of fake time in 1 s steps, each with renewals in between: no change */
        for (int s = 0; s < 20; s++) {
                clock_fake_advance(&f->clk, 1000);
                wait_attempts(f, 0, 2);
                wait_attempts(f, 1, 2);
                assert_true(leader_is_leader(f->e[leader].l));
                assert_false(leader_is_leader(f->e[1 - leader].l));
        }
        wait_count(&f->e[leader].started, "on_started");
        assert_int_equal(atomic_load(&f->e[leader].started), 1);
        assert_int_equal(atomic_load(&f->e[1 - leader].started), 0);
        assert_int_equal(atomic_load(&f->e[leader].stopped), 0);
        assert_true(gauge_is(&f->e[leader], 1));
        assert_true(gauge_is(&f->e[1 - leader], 0));

        lease = get_lease(f);
        assert_string_equal(spec_str(lease, "holderIdentity"), leader_identity(f->e[leader].l));
        assert_int_equal(spec_int(lease, "leaseDurationSeconds"), 15);
        assert_int_equal(spec_int(lease, "leaseTransitions"), 0);
        assert_micro_time(spec_str(lease, "acquireTime"));
        assert_micro_time(spec_str(lease, "renewTime"));
        /* renewals moved renewTime but kept acquireTime */
        assert_string_not_equal(spec_str(lease, "acquireTime"), spec_str(lease, "renewTime"));
        cJSON_Delete(lease);
}

static void test_leader__killed_leader_is_replaced_after_lease_duration(void **state)
{
        struct fx *f = *state;

        start_both_alpha_first(f);
        leader_abandon(f->e[0].l); /* as if killed: the Lease still names alpha */
        assert_holder(f, "alpha", 0);

        clock_fake_advance(&f->clk, 14000);
        wait_attempts(f, 1, 5);
        assert_false(leader_is_leader(f->e[1].l));

        clock_fake_advance(&f->clk, 1500);
        wait_leading(f, 1, true);
        assert_holder(f, "bravo", 1);
        wait_count(&f->e[1].started, "on_started");
        assert_int_equal(atomic_load(&f->e[1].started), 1);
        assert_int_equal(atomic_load(&f->e[0].stopped), 0);
}

static void test_leader__released_lease_is_taken_at_once(void **state)
{
        struct fx *f = *state;
        cJSON *lease;

        start_both_alpha_first(f);
        leader_stop(f->e[0].l);
        assert_false(leader_is_leader(f->e[0].l));
        assert_true(gauge_is(&f->e[0], 0));
        /* no fake time passes: the empty holder is free to take */
        wait_leading(f, 1, true);
        assert_holder(f, "bravo", 1);
        /* a stop is not a loss */
        assert_int_equal(atomic_load(&f->e[0].stopped), 0);
        leader_stop(f->e[0].l); /* idempotent */

        leader_stop(f->e[1].l);
        lease = get_lease(f);
        assert_string_equal(spec_str(lease, "holderIdentity"), "");
        assert_int_equal(spec_int(lease, "leaseDurationSeconds"), 1);
        cJSON_Delete(lease);
}

/* Counts log entries with this method, lease path and status. */
static int count_requests(struct fx *f, const char *method, int status)
{
        return kubesim_count_requests(&f->sim,
                                      &(struct kubesim_match){ .method = method,
                                                               .path_has = "/leases/" LEASE,
                                                               .status = status });
}

/* A merge patch of the Lease by the test's own client, as someone else would write it. */
static void patch_lease(struct fx *f, const char *body)
{
        cJSON *out = NULL;

        assert_int_equal(kube_patch(f->kc,
                                    &(struct kube_patch_opts){ .resource = &KUBE_RES_LEASES,
                                                               .ns = NS,
                                                               .name = LEASE,
                                                               .type = KUBE_PATCH_MERGE,
                                                               .body = body },
                                    &out, NULL),
                         0);
        cJSON_Delete(out);
}

static void test_leader__conflicting_write_is_reread_and_renewed(void **state)
{
        struct fx *f = *state;

        assert_int_equal(leader_start(f->e[0].l), 0);
        wait_leading(f, 0, true);
        wait_attempts(f, 0, 2);
        kubesim_clear_requests(&f->sim);
        /* someone else writes the Lease: alpha's cached resourceVersion is now stale */
        patch_lease(f, "{\"metadata\":{\"labels\":{\"touched\":\"yes\"}}}");
        wait_attempts(f, 0, 3);
        assert_true(leader_is_leader(f->e[0].l));
        assert_true(count_requests(f, "PUT", 409) >= 1); /* the fast path hit the conflict */
        assert_true(count_requests(f, "GET", 200) >= 1); /* re-read */
        assert_true(count_requests(f, "PUT", 200) >= 1); /* and renewed */
        assert_holder(f, "alpha", 0);
        assert_int_equal(atomic_load(&f->e[0].stopped), 0);
}

static void test_leader__foreign_holder_ends_leadership(void **state)
{
        struct fx *f = *state;

        assert_int_equal(leader_start(f->e[0].l), 0);
        wait_leading(f, 0, true);
        patch_lease(f, "{\"spec\":{\"holderIdentity\":\"intruder\","
                       "\"renewTime\":\"2027-01-15T08:00:00.000000Z\"}}");
        wait_stopped(f, 0);
        assert_false(leader_is_leader(f->e[0].l));
        assert_true(gauge_is(&f->e[0], 0));
        assert_int_equal(atomic_load(&f->e[0].stopped), 1);
        assert_holder(f, "intruder", 0);
        leader_stop(f->e[0].l); /* no release: alpha no longer holds it */
        assert_holder(f, "intruder", 0);
}

static void test_leader__renew_deadline_passes_and_leader_gives_up(void **state)
{
        struct fx *f = *state;

        assert_int_equal(leader_start(f->e[0].l), 0);
        wait_leading(f, 0, true);
        kubesim_faults(&f->sim, "{\"errorRate\":1,\"errorCode\":403}");
        clock_fake_advance(&f->clk, 9000);
        wait_attempts(f, 0, 3);
        assert_true(leader_is_leader(f->e[0].l)); /* failing, but within the deadline */
        assert_int_equal(atomic_load(&f->e[0].stopped), 0);
        clock_fake_advance(&f->clk, 1000);
        wait_stopped(f, 0);
        assert_false(leader_is_leader(f->e[0].l));
        kubesim_faults(&f->sim, "{\"errorRate\":0}");
}

struct self_stopper {
        struct leader *l;
        atomic_int calls;
};

static void stop_self(void *arg)
{
        struct self_stopper *s = arg;

        leader_stop(s->l); /* from the elector thread: must not join itself */
        atomic_fetch_add(&s->calls, 1);
}

static void test_leader__stop_from_on_stopped_does_not_deadlock(void **state)
{
        struct fx *f = *state;
        struct self_stopper s = { 0 };

        assert_int_equal(leader_new(&(struct leader_opts){ .config = &f->sim.cfg,
                                                           .namespace = NS,
                                                           .name = LEASE,
                                                           .identity = "selfish",
                                                           .retry_ms = RETRY_MS,
                                                           .clock = &f->clk.ops,
                                                           .on_stopped = stop_self,
                                                           .arg = &s },
                                    &s.l),
                         0);
        assert_int_equal(leader_start(s.l), 0);
        for (int n = 0; n < WAIT_MS / 2 && !leader_is_leader(s.l); n++)
                nap();
        assert_true(leader_is_leader(s.l));
        patch_lease(f, "{\"spec\":{\"holderIdentity\":\"intruder\"}}");
        wait_count(&s.calls, "on_stopped");
        s.l = leader_free(s.l); /* joins the finished thread */
}

/* The production path: the system clock, real microseconds, short real periods. */
static void test_leader__system_clock_takeover_after_kill(void **state)
{
        struct fx *f = *state;
        struct leader *l[2] = { NULL, NULL };
        const char *ids[2] = { "sys-a", "sys-b" };
        const char *t;
        cJSON *lease;

        for (int i = 0; i < 2; i++)
                assert_int_equal(leader_new(&(struct leader_opts){ .config = &f->sim.cfg,
                                                                   .namespace = NS,
                                                                   .name = "sys-lease",
                                                                   .identity = ids[i],
                                                                   .lease_ms = 1000,
                                                                   .renew_deadline_ms = 600,
                                                                   .retry_ms = 50 },
                                            &l[i]),
                                 0);
        assert_int_equal(leader_start(l[0]), 0);
        for (int n = 0; n < WAIT_MS / 2 && !leader_is_leader(l[0]); n++)
                nap();
        assert_true(leader_is_leader(l[0]));
        assert_int_equal(leader_start(l[1]), 0);
        for (uint64_t a = leader_attempts(l[1]); leader_attempts(l[1]) < a + 3;)
                nap();
        assert_false(leader_is_leader(l[1]));
        leader_abandon(l[0]);
        for (int n = 0; n < WAIT_MS / 2 && !leader_is_leader(l[1]); n++)
                nap();
        assert_true(leader_is_leader(l[1]));
        assert_int_equal(kube_get(f->kc, &KUBE_RES_LEASES, NS, "sys-lease", &lease, NULL), 0);
        assert_string_equal(spec_str(lease, "holderIdentity"), "sys-b");
        assert_int_equal(spec_int(lease, "leaseDurationSeconds"), 1);
        t = spec_str(lease, "renewTime");
        assert_non_null(t);
        assert_micro_time(t);
        assert_true(t && t[0] == '2' && t[1] == '0'); /* a real date, not the epoch */
        cJSON_Delete(lease);
        for (int i = 0; i < 2; i++)
                l[i] = leader_free(l[i]);
}

static void test_leader__new_rejects_bad_options(void **state)
{
        struct fx *f = *state;
        struct leader *l = NULL;

        assert_int_equal(
                leader_new(&(struct leader_opts){ .config = &f->sim.cfg, .name = LEASE }, &l),
                CM_EINVAL);
        assert_int_equal(leader_new(&(struct leader_opts){ .config = &f->sim.cfg,
                                                           .namespace = NS,
                                                           .name = LEASE,
                                                           .lease_ms = 5000,
                                                           .renew_deadline_ms = 6000 },
                                    &l),
                         CM_EINVAL);
        assert_null(l);
        /* a generated identity is <hostname>_<uuid> */
        assert_int_equal(leader_new(&(struct leader_opts){ .config = &f->sim.cfg,
                                                           .namespace = NS,
                                                           .name = LEASE },
                                    &l),
                         0);
        assert_non_null(strchr(leader_identity(l), '_'));
        assert_int_equal(strlen(strrchr(leader_identity(l), '_')), 37);
        l = leader_free(l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_leader__exactly_one_of_two_leads, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_leader__killed_leader_is_replaced_after_lease_duration, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(test_leader__released_lease_is_taken_at_once, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_leader__conflicting_write_is_reread_and_renewed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_leader__foreign_holder_ends_leadership, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_leader__renew_deadline_passes_and_leader_gives_up, setup, teardown),
                cmocka_unit_test_setup_teardown(test_leader__stop_from_on_stopped_does_not_deadlock,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_leader__system_clock_takeover_after_kill,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_leader__new_rejects_bad_options, setup,
                                                teardown),
        };

        return cmocka_run_group_tests_name("leader", tests, NULL, NULL);
}
