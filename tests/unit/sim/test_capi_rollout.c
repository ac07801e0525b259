/*
 * capi-sim's rollout rules (tests/sim/capi/rollout_rules.c), as Cluster API's
 * MachineDeployment and KubeadmControlPlane controllers apply them: the machine-template-hash
 * and the MachineSet's name, maxSurge and maxUnavailable (integers and percentages), a
 * MachineDeployment's rolling-update steps and a KubeadmControlPlane's one-at-a-time order.
 * The rollouts are played step by step on member lists, no server involved.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rollout_rules.h"

#define MAX_MEMBERS 16

/* A MachineDeployment with template spec tspec and optional extra spec members. */
static cJSON *md_doc(const char *tspec, const char *extra)
{
        char text[2048];
        cJSON *o;

        (void)snprintf(text, sizeof(text),
                       "{\"metadata\":{\"name\":\"md-0\",\"uid\":\"uid-1\"},\"spec\":{%s%s"
                       "\"template\":{\"metadata\":{\"labels\":{\"team\":\"a\"}},\"spec\":%s}}}",
                       extra ? extra : "", extra ? "," : "", tspec);
        o = cJSON_Parse(text);
        assert_non_null(o);
        return o;
}

static void hash_of(const char *tspec, const char *extra, char out[CAPI_HASH_LEN])
{
        cJSON *md = md_doc(tspec, extra);

        capi_md_template_hash(md, out);
        cJSON_Delete(md);
}

#define TSPEC_WITH(infra, boot, version, fd)                                               \
        "{\"clusterName\":\"c1\",\"infrastructureRef\":{\"kind\":\"MaasMachineTemplate\"," \
        "\"name\":\"" infra "\"},\"bootstrap\":{\"configRef\":{\"name\":\"" boot "\"}},"   \
        "\"version\":\"" version "\"" fd "}"
#define TSPEC TSPEC_WITH("t1", "b1", "v1.30.0", "")

/* Only the rollout fields (infrastructureRef, bootstrap, version, failureDomain) make a new
 * MachineSet: replicas, the strategy, the template's labels and clusterName do not. */
static void test_capi_rollout__template_hash_covers_the_rollout_fields(void **state)
{
        char h[CAPI_HASH_LEN], other[CAPI_HASH_LEN];

        (void)state;
        hash_of(TSPEC, NULL, h);
        assert_true(h[0] != '\0');
        assert_int_equal(strspn(h, "0123456789"), strlen(h));
        hash_of(TSPEC, "\"replicas\":5,\"strategy\":{\"rollingUpdate\":{\"maxSurge\":3}}", other);
        assert_string_equal(h, other);
        hash_of("{\"clusterName\":\"c2\",\"infrastructureRef\":{\"kind\":\"MaasMachineTemplate\","
                "\"name\":\"t1\"},\"bootstrap\":{\"configRef\":{\"name\":\"b1\"}},"
                "\"version\":\"v1.30.0\"}",
                NULL, other);
        assert_string_equal(h, other);

        hash_of(TSPEC_WITH("t2", "b1", "v1.30.0", ""), NULL, other);
        assert_string_not_equal(h, other);
        hash_of(TSPEC_WITH("t1", "b2", "v1.30.0", ""), NULL, other);
        assert_string_not_equal(h, other);
        hash_of(TSPEC_WITH("t1", "b1", "v1.31.0", ""), NULL, other);
        assert_string_not_equal(h, other);
        hash_of(TSPEC_WITH("t1", "b1", "v1.30.0", ",\"failureDomain\":\"az1\""), NULL, other);
        assert_string_not_equal(h, other);
}

static bool all_in(const char *s, const char *alphabet)
{
        return strspn(s, alphabet) == strlen(s);
}

/* <md>-<5 characters of Kubernetes' random alphabet>, the label <hash>-<the same 5>; the
 * same inputs give the same name (a pass before the informer saw its create finds it), a
 * name stays within 63 characters. */
static void test_capi_rollout__machineset_name_and_label(void **state)
{
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
        char name[CAPI_SET_NAME_LEN], label[CAPI_HASH_LEN];
        char again[CAPI_SET_NAME_LEN], again_label[CAPI_HASH_LEN];
        char want_label[CAPI_HASH_LEN];
        char long_md[80];

        (void)state;
        capi_md_set_name("md-0", "uid-1", "12345", name, label);
        assert_int_equal(strlen(name), strlen("md-0-") + 5);
        assert_memory_equal(name, "md-0-", 5);
        assert_true(all_in(name + 5, alphabet));
        (void)snprintf(want_label, sizeof(want_label), "12345-%s", name + 5);
        assert_string_equal(label, want_label);

        capi_md_set_name("md-0", "uid-1", "12345", again, again_label);
        assert_string_equal(again, name);
        assert_string_equal(again_label, label);
        capi_md_set_name("md-0", "uid-2", "12345", again, again_label);
        assert_string_not_equal(again, name); /* another MachineDeployment of the same name */
        capi_md_set_name("md-0", "uid-1", "67890", again, again_label);
        assert_string_not_equal(again, name); /* another template */
        assert_memory_equal(again_label, "67890-", 6);

        memset(long_md, 'm', 70);
        long_md[70] = '\0';
        capi_md_set_name(long_md, "uid-1", "12345", name, label);
        assert_int_equal(strlen(name), 63);
        assert_memory_equal(name, long_md, 57);
        assert_int_equal(name[57], '-');
        assert_true(all_in(name + 58, alphabet));
}

static size_t int_or_percent(const char *json, size_t replicas, bool up, size_t def)
{
        cJSON *v = json ? cJSON_Parse(json) : NULL;
        size_t r;

        assert_true(!json || v);
        r = capi_int_or_percent(v, replicas, up, def);
        cJSON_Delete(v);
        return r;
}

/* intOrString: an integer as is, "N%" of replicas rounded up for maxSurge and down for
 * maxUnavailable; anything else is the default. */
static void test_capi_rollout__int_or_percent(void **state)
{
        (void)state;
        assert_int_equal(int_or_percent("2", 10, true, 7), 2);
        assert_int_equal(int_or_percent("0", 10, true, 7), 0);
        assert_int_equal(int_or_percent("\"25%\"", 10, true, 7), 3);
        assert_int_equal(int_or_percent("\"25%\"", 10, false, 7), 2);
        assert_int_equal(int_or_percent("\"33%\"", 3, true, 7), 1);
        assert_int_equal(int_or_percent("\"33%\"", 3, false, 7), 0);
        assert_int_equal(int_or_percent("\"100%\"", 7, false, 9), 7);
        assert_int_equal(int_or_percent("\"0%\"", 7, true, 9), 0);
        assert_int_equal(int_or_percent(NULL, 10, true, 7), 7);
        assert_int_equal(int_or_percent("-1", 10, true, 7), 7);
        assert_int_equal(int_or_percent("\"101%\"", 10, true, 7), 7);
        assert_int_equal(int_or_percent("\"10\"", 10, true, 7), 7);
        assert_int_equal(int_or_percent("\"%\"", 10, true, 7), 7);
        assert_int_equal(int_or_percent("\"abc\"", 10, true, 7), 7);
        assert_int_equal(int_or_percent("\"\"", 10, true, 7), 7);
        assert_int_equal(int_or_percent("true", 10, true, 7), 7);
}

static void strategy_of(const char *extra, size_t want, size_t *surge, size_t *unav)
{
        cJSON *md = md_doc(TSPEC, extra);

        capi_md_strategy(md, want, surge, unav);
        cJSON_Delete(md);
}

/* Defaults 1 and 0; both 0 reads as maxUnavailable 1; v1beta2's spec.rollout.strategy and
 * v1beta1's spec.strategy are both read. */
static void test_capi_rollout__md_strategy(void **state)
{
        size_t surge = 99, unav = 99;

        (void)state;
        strategy_of(NULL, 3, &surge, &unav);
        assert_int_equal(surge, 1);
        assert_int_equal(unav, 0);
        strategy_of("\"strategy\":{\"rollingUpdate\":{\"maxSurge\":0,\"maxUnavailable\":0}}", 3,
                    &surge, &unav);
        assert_int_equal(surge, 0);
        assert_int_equal(unav, 1);
        strategy_of("\"rollout\":{\"strategy\":{\"rollingUpdate\":{\"maxSurge\":\"50%\","
                    "\"maxUnavailable\":\"25%\"}}}",
                    4, &surge, &unav);
        assert_int_equal(surge, 2);
        assert_int_equal(unav, 1);
        strategy_of("\"strategy\":{\"rollingUpdate\":{\"maxSurge\":2}}", 5, &surge, &unav);
        assert_int_equal(surge, 2);
        assert_int_equal(unav, 0);
}

/* ---- MachineDeployment steps ---- */

struct fleet {
        struct capi_member m[MAX_MEMBERS];
        bool is_new[MAX_MEMBERS];
        size_t n;
};

static void add(struct fleet *f, bool is_new, bool ready)
{
        assert_true(f->n < MAX_MEMBERS);
        memset(&f->m[f->n], 0, sizeof(f->m[f->n]));
        (void)snprintf(f->m[f->n].name, sizeof(f->m[f->n].name), "m%zu", f->n);
        f->m[f->n].ready = ready;
        f->is_new[f->n] = is_new;
        f->n++;
}

static size_t plan(struct fleet *f, size_t want, size_t surge, size_t unav, bool *del)
{
        return capi_md_rollout_plan(f->m, f->is_new, f->n, want, surge, unav, del);
}

/* A new unavailable Machine costs availability: while the new set's Machine is not ready,
 * and the surge is spent, no old one goes; once it is, the oldest available old one does. */
static void test_capi_rollout__md_new_unavailable_counts_against_it(void **state)
{
        struct fleet f = { 0 };
        bool del[MAX_MEMBERS];

        (void)state;
        for (int i = 0; i < 3; i++)
                add(&f, false, true);
        assert_int_equal(plan(&f, 3, 1, 0, del), 1); /* the surge: one new, none goes */
        for (size_t i = 0; i < f.n; i++)
                assert_false(del[i]);
        add(&f, true, false);
        assert_int_equal(plan(&f, 3, 1, 0, del), 0);
        for (size_t i = 0; i < f.n; i++)
                assert_false(del[i]);
        f.m[3].ready = true;
        assert_int_equal(plan(&f, 3, 1, 0, del), 0);
        assert_true(del[0]); /* the oldest */
        assert_false(del[1] || del[2] || del[3]);
}

/* Old unavailable Machines go first (they cost nothing); Machines being deleted count for
 * nothing and are not deleted again. */
static void test_capi_rollout__md_old_unavailable_first(void **state)
{
        struct fleet f = { 0 };
        bool del[MAX_MEMBERS];

        (void)state;
        add(&f, false, true);
        add(&f, false, false);
        add(&f, false, true);
        assert_int_equal(plan(&f, 3, 1, 1, del), 1);
        assert_false(del[0]);
        assert_true(del[1]);
        assert_false(del[2]);

        f = (struct fleet){ 0 };
        add(&f, false, true);
        f.m[0].deleting = true;
        for (int i = 0; i < 3; i++)
                add(&f, false, true);
        assert_int_equal(plan(&f, 3, 1, 0, del), 1); /* 3 active: room for one more */
        for (size_t i = 0; i < f.n; i++)
                assert_false(del[i]);
}

/* maxSurge caps the creations: never more than replicas + maxSurge Machines, and never more
 * new ones than replicas. */
static void test_capi_rollout__md_surge_caps_creations(void **state)
{
        struct fleet f = { 0 };
        bool del[MAX_MEMBERS];

        (void)state;
        for (int i = 0; i < 4; i++)
                add(&f, false, true);
        assert_int_equal(plan(&f, 4, 2, 0, del), 2);
        assert_int_equal(plan(&f, 4, 9, 0, del), 4);
        f = (struct fleet){ 0 };
        for (int i = 0; i < 3; i++)
                add(&f, true, true);
        assert_int_equal(plan(&f, 3, 1, 0, del), 0); /* rolled out: nothing to do */
        for (size_t i = 0; i < f.n; i++)
                assert_false(del[i]);
}

/* Plays a whole rollout from want old ready Machines: each step's deletions go at once,
 * its creations come unready and are ready by the next step, until a step does nothing. At
 * every step there are at most want + surge Machines and at least want - unav ready; it
 * ends with want new ones. Returns the steps that acted. */
static unsigned play_md_rollout(size_t want, size_t surge, size_t unav)
{
        struct fleet f = { 0 };
        unsigned steps = 0;

        for (size_t i = 0; i < want; i++)
                add(&f, false, true);
        for (;; steps++) {
                bool del[MAX_MEMBERS];
                size_t create = plan(&f, want, surge, unav, del), kept = 0, ready = 0;
                size_t before = f.n;

                assert_true(steps < 4 * want + 4);
                for (size_t i = 0; i < f.n; i++) {
                        if (del[i])
                                continue;
                        f.m[kept] = f.m[i];
                        f.is_new[kept++] = f.is_new[i];
                }
                f.n = kept;
                for (size_t i = 0; i < create; i++)
                        add(&f, true, false);
                for (size_t i = 0; i < f.n; i++)
                        ready += f.m[i].ready;
                assert_true(f.n <= want + surge);
                assert_true(ready + unav >= want);
                if (create == 0 && kept == before)
                        break; /* nothing more to do: rolled out (checked below) or stuck */
                for (size_t i = 0; i < f.n; i++)
                        f.m[i].ready = true;
        }
        assert_int_equal(f.n, want);
        for (size_t i = 0; i < f.n; i++)
                assert_true(f.is_new[i] && f.m[i].ready);
        return steps; /* the steps that acted */
}

static void test_capi_rollout__md_rollout_within_surge_and_unavailable(void **state)
{
        (void)state;
        assert_int_equal(play_md_rollout(3, 1, 0), 6); /* one new, one old out, thrice */
        (void)play_md_rollout(3, 0, 1);                /* old first: maxSurge 0 */
        (void)play_md_rollout(5, 2, 1);
        (void)play_md_rollout(4, 4, 0);
        (void)play_md_rollout(1, 1, 0);
}

/* ---- KubeadmControlPlane ---- */

static void cp(struct fleet *f, const char *fd, bool outdated, bool ready)
{
        add(f, !outdated, ready);
        (void)snprintf(f->m[f->n - 1].failure_domain, sizeof(f->m[0].failure_domain), "%s", fd);
}

static bool *outdated_of(const struct fleet *f, bool *out)
{
        for (size_t i = 0; i < f->n; i++)
                out[i] = !f->is_new[i];
        return out;
}

static enum capi_kcp_step kcp_step(const struct fleet *f, size_t want, size_t surge, size_t *del)
{
        bool outdated[MAX_MEMBERS];

        return capi_kcp_rollout_step(f->m, outdated_of(f, outdated), f->n, want, surge, del);
}

/* The template (cloned-from) or the version makes a control plane outdated; NULL or "" is
 * not compared. */
static void test_capi_rollout__kcp_outdated(void **state)
{
        struct capi_member m = { .tmpl = "cp-t1", .version = "v1.30.0" };

        (void)state;
        assert_false(capi_kcp_outdated(&m, "cp-t1", "v1.30.0"));
        assert_true(capi_kcp_outdated(&m, "cp-t2", "v1.30.0"));
        assert_true(capi_kcp_outdated(&m, "cp-t1", "v1.31.0"));
        assert_false(capi_kcp_outdated(&m, NULL, NULL));
        assert_false(capi_kcp_outdated(&m, "cp-t1", ""));
}

/* Nothing while a control plane is not ready or is being deleted; one new first with
 * maxSurge 1; then the oldest outdated one of the failure domain holding the most. */
static void test_capi_rollout__kcp_steps(void **state)
{
        struct fleet f = { 0 };
        size_t del = 99;

        (void)state;
        cp(&f, "a", false, true);
        cp(&f, "b", false, true);
        cp(&f, "c", false, true);
        assert_int_equal(kcp_step(&f, 3, 1, &del), CAPI_KCP_NONE);

        f = (struct fleet){ 0 };
        cp(&f, "a", true, true);
        cp(&f, "b", true, true);
        cp(&f, "c", true, true);
        assert_int_equal(kcp_step(&f, 3, 1, &del), CAPI_KCP_UP);
        f.m[1].ready = false;
        assert_int_equal(kcp_step(&f, 3, 1, &del), CAPI_KCP_WAIT);
        f.m[1].ready = true;
        f.m[2].deleting = true;
        assert_int_equal(kcp_step(&f, 3, 1, &del), CAPI_KCP_WAIT);
        f.m[2].deleting = false;

        cp(&f, "a", false, true); /* the new one, in a: a holds two */
        assert_int_equal(kcp_step(&f, 3, 1, &del), CAPI_KCP_DOWN);
        assert_int_equal(del, 0);

        f = (struct fleet){ 0 };
        cp(&f, "a", true, true);
        cp(&f, "b", true, true);
        cp(&f, "b", true, true);
        cp(&f, "c", false, true);
        assert_int_equal(kcp_step(&f, 3, 1, &del), CAPI_KCP_DOWN);
        assert_int_equal(del, 1); /* b holds the most; its oldest */

        /* maxSurge 0: the outdated one goes first, the replica count brings the new one */
        f = (struct fleet){ 0 };
        cp(&f, "a", true, true);
        cp(&f, "b", true, true);
        cp(&f, "c", true, true);
        assert_int_equal(kcp_step(&f, 3, 0, &del), CAPI_KCP_DOWN);
        assert_int_equal(del, 0);
        f.m[0] = f.m[1];
        f.m[1] = f.m[2];
        f.n = 2;
        assert_int_equal(kcp_step(&f, 3, 0, &del), CAPI_KCP_NONE);
}

/* Plays a control-plane rollout of want: a new Machine is ready, a deleted one gone, one
 * step after the step that made it. One control plane changes at a time: between the
 * steps that act, every Machine is ready and none is being deleted, never more than
 * want + surge nor fewer than want - (1 - surge) exist, and the actions alternate (with
 * maxSurge 1: up, down, ...; with 0: down, then the replica count's new one). */
static void play_kcp_rollout(size_t want, size_t surge)
{
        static const char *const fds[] = { "a", "b", "c" };
        struct fleet f = { 0 };
        char actions[64] = "";
        size_t len = 0;

        for (size_t i = 0; i < want; i++)
                cp(&f, fds[i % 3], true, true);
        for (unsigned steps = 0;; steps++) {
                size_t del = 99;
                enum capi_kcp_step s = kcp_step(&f, want, surge, &del);
                size_t active = 0;

                assert_true(steps < 8 * want);
                for (size_t i = 0; i < f.n; i++)
                        active += !f.m[i].deleting;
                assert_true(active <= want + surge);
                assert_true(active + 1 - surge >= want);
                if (s == CAPI_KCP_WAIT) { /* the change in flight completes */
                        size_t kept = 0;

                        for (size_t i = 0; i < f.n; i++) {
                                if (f.m[i].deleting)
                                        continue;
                                f.m[i].ready = true;
                                f.m[kept] = f.m[i];
                                f.is_new[kept++] = f.is_new[i];
                        }
                        f.n = kept;
                        continue;
                }
                if (s == CAPI_KCP_NONE && active >= want)
                        break;
                assert_true(len + 1 < sizeof(actions));
                if (s == CAPI_KCP_DOWN) {
                        assert_false(f.is_new[del]);
                        f.m[del].deleting = true;
                        actions[len++] = 'D';
                } else { /* UP, or the replica count (NONE below want) */
                        cp(&f, fds[f.n % 3], false, false);
                        actions[len++] = s == CAPI_KCP_UP ? 'U' : 'n';
                }
                actions[len] = '\0';
        }
        for (size_t i = 0; i < f.n; i++)
                assert_true(f.is_new[i] && f.m[i].ready);
        assert_int_equal(f.n, want);
        print_message("kcp rollout of %zu, maxSurge %zu: %s\n", want, surge, actions);
        if (surge)
                assert_memory_equal(actions, "UDUDUDUDUD", 2 * want);
        else
                assert_memory_equal(actions, "DnDnDnDnDn", 2 * want);
        assert_int_equal(len, 2 * want);
}

static void test_capi_rollout__kcp_one_at_a_time(void **state)
{
        (void)state;
        play_kcp_rollout(3, 1);
        play_kcp_rollout(3, 0);
        play_kcp_rollout(5, 1);
        play_kcp_rollout(1, 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_capi_rollout__template_hash_covers_the_rollout_fields),
                cmocka_unit_test(test_capi_rollout__machineset_name_and_label),
                cmocka_unit_test(test_capi_rollout__int_or_percent),
                cmocka_unit_test(test_capi_rollout__md_strategy),
                cmocka_unit_test(test_capi_rollout__md_new_unavailable_counts_against_it),
                cmocka_unit_test(test_capi_rollout__md_old_unavailable_first),
                cmocka_unit_test(test_capi_rollout__md_surge_caps_creations),
                cmocka_unit_test(test_capi_rollout__md_rollout_within_surge_and_unavailable),
                cmocka_unit_test(test_capi_rollout__kcp_outdated),
                cmocka_unit_test(test_capi_rollout__kcp_steps),
                cmocka_unit_test(test_capi_rollout__kcp_one_at_a_time),
        };

        return cmocka_run_group_tests_name("capi_rollout", tests, NULL, NULL);
}
