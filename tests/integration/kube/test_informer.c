/*
 * Integration tests for the informer against a real kube-sim over TLS: an exact cache
 * through 1 000 creates, updates and deletes, a forced watch drop and a forced 410 (kube-sim
 * /_sim/faults), compared at every phase with a fresh kube_list and with what the test itself
 * wrote; handler events checked one by one (a shadow copy built only from the events must
 * equal the truth, and the counts are exact); namespace scoping and label selectors honoured.
 *
 * Needs $CAPMAAS_BUILD_DIR/kube-sim. Each test starts its own sim (port 0, fresh state).
 * The informers run their own watch threads (ctest: concurrency).
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
#include <curl/curl.h>

#include "../../../kube/informer_priv.h"
#include "clock.h"
#include "err.h"
#include "informer.h"
#include "kube_client.h"
#include "kubesim.h"
#include "testutil.h"

#define N_OBJS      400 /* 400 creates + 400 updates + 200 deletes = 1 000 writes */
#define N_DELETES   200
#define CONVERGE_MS 15000
#define NAME_FMT    "cm-%04d"

/* --- shadow: the cache as rebuilt from handler events alone --------------------------- */

struct shadow {
        pthread_mutex_t mu;
        char rv[N_OBJS][24]; /* "" = absent */
        unsigned adds, updates, deletes;
        unsigned replays; /* updates with old == cur (resync) */
        unsigned bad;     /* add of a present object, update/delete of an absent one */
};

static int name_idx(const struct kube_object *o)
{
        int i = -1;

        if (sscanf(kube_object_name(o), "cm-%d", &i) != 1 || i < 0 || i >= N_OBJS)
                return -1;
        return i;
}

static void sh_set(struct shadow *s, const struct kube_object *o, bool want_present, const char *rv)
{
        int i = name_idx(o);

        if (i < 0) {
                s->bad++;
                return;
        }
        if ((s->rv[i][0] != '\0') != want_present)
                s->bad++;
        snprintf(s->rv[i], sizeof(s->rv[i]), "%s", rv);
}

static void sh_add(void *arg, const struct kube_object *o)
{
        struct shadow *s = arg;

        pthread_mutex_lock(&s->mu);
        s->adds++;
        sh_set(s, o, false, kube_object_resource_version(o));
        pthread_mutex_unlock(&s->mu);
}

static void sh_update(void *arg, const struct kube_object *old, const struct kube_object *cur)
{
        struct shadow *s = arg;

        pthread_mutex_lock(&s->mu);
        s->updates++;
        s->replays += old == cur;
        if (strcmp(kube_object_name(old), kube_object_name(cur)) != 0)
                s->bad++;
        sh_set(s, cur, true, kube_object_resource_version(cur));
        pthread_mutex_unlock(&s->mu);
}

static void sh_delete(void *arg, const struct kube_object *last)
{
        struct shadow *s = arg;

        pthread_mutex_lock(&s->mu);
        s->deletes++;
        sh_set(s, last, true, "");
        pthread_mutex_unlock(&s->mu);
}

/* --- fixture -------------------------------------------------------------------------- */

/* What the test wrote, for an independent expectation. */
struct written {
        bool alive;
        const char *ns;
        bool team; /* labelled team=x */
};

struct watcher {
        const char *ns;       /* informer scope */
        const char *selector; /* informer selector */
        struct informer *inf;
        struct shadow sh;
};

struct fx {
        struct kubesim sim;
        struct kube_client *kc;
        struct written w[N_OBJS];
        struct watcher scoped; /* ns inf-a, team=x */
        struct watcher all;    /* every namespace, suite=informer */
};

static void watcher_start_resync(
        struct fx *f, struct watcher *w, const char *ns, const char *sel, uint64_t resync_ms)
{
        struct informer_handler h = {
                .on_add = sh_add, .on_update = sh_update, .on_delete = sh_delete, .arg = &w->sh
        };

        w->ns = ns;
        w->selector = sel;
        pthread_mutex_init(&w->sh.mu, NULL);
        assert_int_equal(informer_new(&(struct informer_opts){ .resource = &KUBE_RES_CONFIGMAPS,
                                                               .config = &f->sim.cfg,
                                                               .namespace = ns,
                                                               .label_selector = sel,
                                                               .resync_ms = resync_ms },
                                      &w->inf),
                         0);
        assert_int_equal(informer_add_handler(w->inf, &h), 0);
        assert_int_equal(informer_start(w->inf), 0);
        assert_int_equal(informer_wait_synced(w->inf, 10000), 0);
}

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_int_equal(
                kubesim_start(&f->sim, (const char *const[]){ "--bookmark-interval", "1", NULL }),
                0);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &f->sim.cfg }, &f->kc), 0);
        kubesim_create_namespace(f->kc, "inf-a");
        kubesim_create_namespace(f->kc, "inf-b");
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        f->scoped.inf = informer_free(f->scoped.inf);
        f->all.inf = informer_free(f->all.inf);
        pthread_mutex_destroy(&f->scoped.sh.mu);
        pthread_mutex_destroy(&f->all.sh.mu);
        f->kc = kube_client_free(f->kc);
        assert_int_equal(kubesim_stop(&f->sim), 0);
        free(f);
        return 0;
}

static void watcher_start(struct fx *f, struct watcher *w, const char *ns, const char *sel)
{
        watcher_start_resync(f, w, ns, sel, 0);
}

/* --- writes --------------------------------------------------------------------------- */

static void create_obj(struct fx *f, int i)
{
        struct written *w = &f->w[i];
        cJSON *o = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");
        cJSON *labels = cJSON_AddObjectToObject(md, "labels");
        char name[32];

        /* i % 4: 0, 3 → inf-a with team=x; 1 → inf-a without; 2 → inf-b with team=x */
        w->ns = i % 4 == 2 ? "inf-b" : "inf-a";
        w->team = i % 4 != 1;
        snprintf(name, sizeof(name), NAME_FMT, i);
        cJSON_AddStringToObject(o, "apiVersion", "v1");
        cJSON_AddStringToObject(o, "kind", "ConfigMap");
        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "namespace", w->ns);
        cJSON_AddStringToObject(labels, "suite", "informer");
        if (w->team)
                cJSON_AddStringToObject(labels, "team", "x");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "data"), "v", "0");
        assert_int_equal(kube_create(f->kc, &KUBE_RES_CONFIGMAPS, w->ns, o, NULL, NULL), 0);
        cJSON_Delete(o);
        w->alive = true;
}

static void update_obj(struct fx *f, int i)
{
        char name[32], patch[64];

        snprintf(name, sizeof(name), NAME_FMT, i);
        snprintf(patch, sizeof(patch), "{\"data\":{\"v\":\"%d\"}}", i + 1);
        assert_int_equal(kube_patch(f->kc,
                                    &(struct kube_patch_opts){ .resource = &KUBE_RES_CONFIGMAPS,
                                                               .ns = f->w[i].ns,
                                                               .name = name,
                                                               .subresource = NULL,
                                                               .type = KUBE_PATCH_MERGE,
                                                               .body = patch },
                                    NULL, NULL),
                         0);
}

static void delete_obj(struct fx *f, int i)
{
        char name[32];

        snprintf(name, sizeof(name), NAME_FMT, i);
        assert_int_equal(kube_delete(f->kc, &KUBE_RES_CONFIGMAPS, f->w[i].ns, name, NULL, NULL), 0);
        f->w[i].alive = false;
}

/* --- checks --------------------------------------------------------------------------- */

static bool expected_in(const struct watcher *wt, const struct written *w)
{
        if (!w->alive)
                return false;
        if (wt->ns && strcmp(wt->ns, w->ns) != 0)
                return false;
        return !wt->selector || strcmp(wt->selector, "team=x") != 0 || w->team;
}

/* One listed item against the cache, the test's records and the shadow (lock held). */
static const char *diff_item(struct fx *f, struct watcher *wt, const cJSON *it)
{
        const char *rv = kube_meta_str(it, "resourceVersion");
        struct kube_object *o =
                informer_get(wt->inf, kube_meta_str(it, "namespace"), kube_meta_str(it, "name"));
        int i = o ? name_idx(o) : -1;
        const char *why = NULL;

        if (!o || !rv || strcmp(kube_object_resource_version(o), rv) != 0)
                why = "cache differs from the API";
        else if (i < 0 || !expected_in(wt, &f->w[i]))
                why = "API holds an object the test did not expect";
        else if (strcmp(wt->sh.rv[i], rv) != 0)
                why = "handler events do not rebuild the API state";
        kube_object_unref(o);
        return why;
}

/* Objects the test expects in wt's scope; sets *why if the shadow kept a deleted one. */
static size_t expected_count(struct fx *f, struct watcher *wt, const char **why)
{
        size_t want = 0;

        for (int i = 0; i < N_OBJS; i++) {
                bool in = expected_in(wt, &f->w[i]);

                want += in;
                if (!in && wt->sh.rv[i][0] && !*why)
                        *why = "handlers never reported a delete";
        }
        return want;
}

/* Compares the cache and the shadow with a fresh kube_list and with what was written.
 * Returns NULL when all agree, else a static description of the first difference. */
static const char *diff(struct fx *f, struct watcher *wt)
{
        struct kube_list_opts lo = { .label_selector = wt->selector };
        const char *why = NULL;
        cJSON *list = NULL, *it;
        size_t n = 0, want;

        if (kube_list(f->kc, &KUBE_RES_CONFIGMAPS, wt->ns, &lo, &list, NULL) < 0)
                return "kube_list failed";
        pthread_mutex_lock(&wt->sh.mu);
        cJSON_ArrayForEach (it, cJSON_GetObjectItemCaseSensitive(list, "items")) {
                const char *w = diff_item(f, wt, it);

                why = why ? why : w;
                n++;
        }
        want = expected_count(f, wt, &why);
        if (!why && (n != want || informer_len(wt->inf) != n))
                why = "object counts differ";
        if (!why && wt->sh.adds - wt->sh.deletes != n)
                why = "adds - deletes != cached objects";
        pthread_mutex_unlock(&wt->sh.mu);
        cJSON_Delete(list);
        return why;
}

static void converge(struct fx *f, struct watcher *wt)
{
        const char *why = "not checked";

        for (int i = 0; i < CONVERGE_MS / 20 && why; i++) {
                why = diff(f, wt);
                if (why)
                        usleep(20000);
        }
        if (why)
                fail_msg("informer ns=%s selector=%s did not converge: %s", wt->ns ? wt->ns : "*",
                         wt->selector, why);
        assert_int_equal(wt->sh.bad, 0);
}

static void expect_counts(struct watcher *wt, unsigned adds, unsigned updates, unsigned deletes)
{
        pthread_mutex_lock(&wt->sh.mu);
        assert_int_equal(wt->sh.adds, adds);
        assert_int_equal(wt->sh.updates, updates);
        assert_int_equal(wt->sh.deletes, deletes);
        assert_int_equal(wt->sh.bad, 0);
        pthread_mutex_unlock(&wt->sh.mu);
}

static void converge_both(struct fx *f)
{
        converge(f, &f->scoped);
        converge(f, &f->all);
}

/* --- tests ---------------------------------------------------------------------------- */

static void test_informer__exact_cache_through_1000_writes_drop_and_410(void **state)
{
        struct fx *f = *state;
        uint64_t calls_scoped, calls_all;
        unsigned scoped = 0;

        watcher_start(f, &f->scoped, "inf-a", "team=x");
        watcher_start(f, &f->all, NULL, "suite=informer");
        for (int i = 0; i < N_OBJS; i++) {
                create_obj(f, i);
                scoped += expected_in(&f->scoped, &f->w[i]);
        }
        converge_both(f);
        assert_int_equal(scoped, N_OBJS / 2);
        expect_counts(&f->scoped, scoped, 0, 0);
        expect_counts(&f->all, N_OBJS, 0, 0);

        /* updates with every watch dropped half-way: reconnects resume from the last
         * resourceVersion, so nothing is lost and nothing repeats */
        calls_scoped = informer_api_calls(f->scoped.inf);
        calls_all = informer_api_calls(f->all.inf);
        for (int i = 0; i < N_OBJS; i++) {
                if (i == N_OBJS / 2)
                        kubesim_faults(&f->sim, "{\"dropWatches\":true}");
                update_obj(f, i);
        }
        converge_both(f);
        assert_true(informer_api_calls(f->scoped.inf) > calls_scoped);
        assert_true(informer_api_calls(f->all.inf) > calls_all);
        expect_counts(&f->scoped, scoped, scoped, 0);
        expect_counts(&f->all, N_OBJS, N_OBJS, 0);

        /* deletes around a forced 410: the next watch to start expires, that informer
         * relists and diffs; every delete is reported exactly once either way */
        kubesim_faults(&f->sim, "{\"expireNextWatch\":true,\"dropWatches\":true}");
        for (int i = 0; i < N_DELETES; i++)
                delete_obj(f, i);
        converge_both(f);
        expect_counts(&f->scoped, scoped, scoped, scoped / 2);
        expect_counts(&f->all, N_OBJS, N_OBJS, N_DELETES);
}

static void test_informer__relist_after_410_diffs_changes_made_while_away(void **state)
{
        struct fx *f = *state;
        struct kube_object **v = NULL;
        size_t n = 0;

        for (int i = 0; i < 40; i++)
                create_obj(f, i);
        watcher_start(f, &f->all, NULL, "suite=informer");
        converge(f, &f->all);
        expect_counts(&f->all, 40, 0, 0);
        /* the expired watch is only noticed on reconnect, so writes racing it land either
         * in the watch or in the relist; both paths must give the same events */
        kubesim_faults(&f->sim, "{\"expireNextWatch\":true,\"dropWatches\":true}");
        for (int i = 0; i < 10; i++)
                delete_obj(f, i);
        for (int i = 10; i < 20; i++)
                update_obj(f, i);
        for (int i = 40; i < 50; i++)
                create_obj(f, i);
        converge(f, &f->all);
        expect_counts(&f->all, 50, 10, 10);
        assert_int_equal(informer_list(f->all.inf, "inf-b", NULL, &v, &n), 0);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(kube_object_namespace(v[i]), "inf-b");
        assert_true(n > 0);
        kube_object_list_free(v, n);
}

static void test_informer__backs_off_while_the_server_fails_then_syncs(void **state)
{
        struct fx *f = *state;
        struct informer_handler h = { .on_add = sh_add, .arg = &f->all.sh };

        for (int i = 0; i < 5; i++)
                create_obj(f, i);
        kubesim_faults(&f->sim, "{\"errorRate\":1,\"errorCode\":500}");
        pthread_mutex_init(&f->all.sh.mu, NULL);
        f->all.selector = "suite=informer";
        assert_int_equal(informer_new(&(struct informer_opts){ .resource = &KUBE_RES_CONFIGMAPS,
                                                               .config = &f->sim.cfg,
                                                               .label_selector = "suite=informer" },
                                      &f->all.inf),
                         0);
        assert_int_equal(informer_add_handler(f->all.inf, &h), 0);
        assert_int_equal(informer_start(f->all.inf), 0);
        assert_int_equal(informer_wait_synced(f->all.inf, 1200), CM_ETIMEDOUT);
        assert_true(informer_list_calls(f->all.inf) >= 1);
        assert_true(informer_list_calls(f->all.inf) <= 3); /* 1 s, 2 s, ... apart */
        kubesim_faults(&f->sim, "{\"errorRate\":0}");
        assert_int_equal(informer_wait_synced(f->all.inf, 10000), 0);
        converge(f, &f->all);
        expect_counts(&f->all, 5, 0, 0);
}

static void test_informer__stop_is_prompt_while_watching(void **state)
{
        struct fx *f = *state;
        uint64_t t0;

        watcher_start(f, &f->scoped, "inf-a", NULL);
        t0 = clock_now_ms(NULL);
        informer_stop(f->scoped.inf);
        assert_true(clock_now_ms(NULL) - t0 < 2000);
        informer_stop(f->scoped.inf); /* idempotent */
}

static unsigned replays(struct watcher *wt)
{
        unsigned n;

        pthread_mutex_lock(&wt->sh.mu);
        n = wt->sh.replays;
        pthread_mutex_unlock(&wt->sh.mu);
        return n;
}

static void test_informer__resync_replays_cache_without_relisting(void **state)
{
        struct fx *f = *state;
        uint64_t lists;

        for (int i = 0; i < 8; i++)
                create_obj(f, i);
        watcher_start_resync(f, &f->all, NULL, "suite=informer", 700);
        converge(f, &f->all);
        lists = informer_list_calls(f->all.inf);
        assert_int_equal(lists, 1);
        /* kube-sim ends watches on whole seconds, so a period may come up to ~2 s late */
        for (int i = 0; i < 500 && replays(&f->all) < 8; i++)
                usleep(20000);
        assert_true(replays(&f->all) >= 8); /* a period's worth (the unit test checks more) */
        assert_int_equal(informer_list_calls(f->all.inf), lists);
        pthread_mutex_lock(&f->all.sh.mu);
        assert_int_equal(f->all.sh.updates, f->all.sh.replays);
        pthread_mutex_unlock(&f->all.sh.mu);
        expect_counts(&f->all, 8, replays(&f->all), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(
                        test_informer__exact_cache_through_1000_writes_drop_and_410, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__relist_after_410_diffs_changes_made_while_away, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__resync_replays_cache_without_relisting, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_informer__backs_off_while_the_server_fails_then_syncs, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(test_informer__stop_is_prompt_while_watching, setup,
                                                teardown),
        };
        int r;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        r = cmocka_run_group_tests_name("integration_informer", tests, NULL, NULL);
        curl_global_cleanup();
        return r;
}
