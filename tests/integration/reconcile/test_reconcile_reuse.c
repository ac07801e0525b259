/*
 * Host reuse's hold time against maas-sim (docs/host-reuse.md): when each kept host's hold
 * started lives in MAAS (the reuse tag's comment), so a capmaas that restarts in the middle
 * of a hold goes on with the same clock; a reuse tag no machine carries is deleted. The
 * providers here are not started: each test runs the sweep on a worker of its own, with a
 * fake clock, so the hold is crossed without waiting for it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../reconcile/maasmachine_reuse.h"
#include "../../../reconcile/worker.h"
#include "clock.h"
#include "json.h"
#include "reconcile_fixture.h"
#include "rfc3339.h"
#include "testutil.h"
#include "xalloc.h"

#define TAG     "capmaas-reuse-0123456789ab"
#define HOLD_MS 60000u
#define WALL_0  1790000000 /* the fake wall clock's start (s) */

static struct provider *unstarted_provider(struct clock_fake *fc)
{
        struct provider_settings s = test_settings();
        struct provider *p = NULL;

        s.reuse_hold_ms = HOLD_MS;
        assert_int_equal(provider_new(&(struct provider_opts){ .settings = s,
                                                               .kube = &CL.mgmt.cfg,
                                                               .maas = &RF.mcfg,
                                                               .clock = &fc->ops },
                                      &p),
                         0);
        return p;
}

/* One sweep of the process-wide MAAS, on a worker of p. */
static void sweep(struct provider *p)
{
        struct reconciler_worker *w = NULL;

        assert_int_equal(reconciler_worker_new(p, NULL, &w), 0);
        maasmachine_reuse_sweep(w);
        reconciler_worker_free(w);
}

/* The comment of maas-sim's tag name (malloc'd), or NULL when there is no such tag. */
static char *tag_comment(const char *name)
{
        cJSON *st = maassim_call(&RF.sim, "GET", "state", NULL);
        const cJSON *t;
        char *out = NULL;

        cJSON_ArrayForEach (t, json_at(st, "tags"))
                if (strcmp(OR(json_at_str(t, "name"), ""), name) == 0)
                        out = xstrdup(OR(json_at_str(t, "comment"), ""));
        cJSON_Delete(st);
        return out;
}

static bool host_tagged(const char *sid, const char *tag)
{
        return sim_machine_tagged(&RF.sim, sid, tag);
}

/* A Ready machine of maas-sim (its system ID, malloc'd). */
static char *ready_host(void)
{
        cJSON *st = maassim_call(&RF.sim, "GET", "state", NULL);
        const cJSON *m;
        char *sid = NULL;

        cJSON_ArrayForEach (m, json_at(st, "machines"))
                if (!sid && strcmp(OR(json_at_str(m, "status_name"), ""), "Ready") == 0)
                        sid = xstrdup(json_at_str(m, "system_id"));
        cJSON_Delete(st);
        assert_non_null(sid);
        return sid;
}

/* tag made (with a comment as maasmachine_reuse_keep writes it) and put on sid, if given. */
static void make_tag(const char *tag, const char *sid)
{
        struct maas_error me = { 0 };
        const char *const add[] = { sid };

        assert_int_equal(maas_create_tag(RF.maas, tag, "capmaas: hosts kept for test", &me), 0);
        if (sid)
                assert_int_equal(maas_tag_update_nodes(RF.maas, tag, add, 1, NULL, 0, &me), 0);
        maas_error_release(&me);
}

/* A host kept Ready: the first capmaas records when its hold started in the tag's comment;
 * restarted 40 s into the 60 s hold, capmaas keeps the host (the hold is not over) and the
 * recorded start (not its own start); 61 s after that start the tag comes off the host, and
 * the tag, carried by no machine now, is deleted. A capmaas counting from its own start
 * would keep the host until 100 s. */
static void test_reuse__a_restart_does_not_restart_the_hold(void **state)
{
        struct clock_fake first, second;
        struct provider *p;
        char stamp[RFC3339_LEN], *want, *c;
        char *sid = ready_host();

        (void)state;
        make_tag(TAG, sid);
        clock_fake_init(&first, 1000, WALL_0);
        p = unstarted_provider(&first);
        sweep(p);
        provider_free(p);
        rfc3339_format(WALL_0, stamp);
        want = xasprintf("capmaas: hosts kept for test; held since: %s=%s", sid, stamp);
        c = tag_comment(TAG);
        assert_non_null(c);
        assert_string_equal(c, want);
        free(c);
        assert_true(host_tagged(sid, TAG));

        /* the restart, 40 s into the hold */
        clock_fake_init(&second, 1000, WALL_0 + 40);
        p = unstarted_provider(&second);
        sweep(p);
        assert_true(host_tagged(sid, TAG));
        c = tag_comment(TAG);
        assert_string_equal(c, want); /* the start as recorded, not rewritten */
        free(c);

        clock_fake_advance(&second, 21000); /* 61 s after the recorded start */
        sweep(p);
        assert_false(host_tagged(sid, TAG));
        assert_null(tag_comment(TAG));
        provider_free(p);
        free(want);
        free(sid);
}

/* A reuse tag no machine carries is deleted by the next sweep; a tag that is no reuse tag
 * is left alone, empty or not; a reuse tag whose host is in use (not Ready) stays, with no
 * hold recorded for that host. */
static void test_reuse__empty_reuse_tags_are_deleted(void **state)
{
        struct clock_fake fc;
        struct provider *p;
        char *sid = ready_host(), *c;
        struct maas_error me = { 0 };
        struct maas_node n = { 0 };

        (void)state;
        make_tag("capmaas-reuse-aaaaaaaaaaaa", NULL);
        make_tag("rack-7", NULL);
        make_tag(TAG, sid);
        assert_int_equal(
                maas_allocate(RF.maas, &(struct maas_allocate_opts){ .system_id = sid }, &n, &me),
                0);
        maas_node_release(&n);
        maas_error_release(&me);
        clock_fake_init(&fc, 1000, WALL_0);
        p = unstarted_provider(&fc);
        sweep(p);
        provider_free(p);
        assert_null(tag_comment("capmaas-reuse-aaaaaaaaaaaa"));
        c = tag_comment("rack-7");
        assert_non_null(c);
        free(c);
        c = tag_comment(TAG);
        assert_non_null(c);
        assert_string_equal(c, "capmaas: hosts kept for test"); /* allocated: no clock */
        free(c);
        assert_true(host_tagged(sid, TAG));
        free(sid);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_reuse__a_restart_does_not_restart_the_hold,
                                                rf_setup, rf_teardown),
                cmocka_unit_test_setup_teardown(test_reuse__empty_reuse_tags_are_deleted, rf_setup,
                                                rf_teardown),
        };

        return cmocka_run_group_tests(tests, rf_group_setup, rf_group_teardown);
}
