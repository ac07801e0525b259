/*
 * Integration: kube_watch against a real kube-sim process (kube_client_fixture.h): events
 * in order from a resourceVersion up to a bookmark, 410 Expired for a version the history
 * dropped, an event over max_event, and a watch ended by its stop flag (from another
 * thread) or by the server closing the stream.
 *
 * ctest: concurrency (one test stops a watch from another thread).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "clock.h"
#include "err.h"
#include "kube_client.h"
#include "kube_client_fixture.h"
#include "kubesim.h"
#include "testutil.h"
#include "xalloc.h"

/* --- watch -------------------------------------------------------------------------------- */

struct seen {
        enum kube_watch_event type[16];
        char name[16][32];
        size_t n;
        atomic_int added;
};

static int on_event(void *arg, enum kube_watch_event type, cJSON *obj)
{
        struct seen *s = arg;
        const char *name = kube_meta_str(obj, "name");

        if (s->n < 16) {
                s->type[s->n] = type;
                snprintf(s->name[s->n], sizeof(s->name[0]), "%s", name ? name : "");
                s->n++;
        }
        if (type == KUBE_WATCH_ADDED)
                atomic_fetch_add(&s->added, 1);
        cJSON_Delete(obj);
        return type == KUBE_WATCH_BOOKMARK; /* the test is done at the first bookmark */
}

static void test_watch__events_in_order_from_a_resource_version(void **state)
{
        static const enum kube_watch_event want[] = { KUBE_WATCH_ADDED, KUBE_WATCH_MODIFIED,
                                                      KUBE_WATCH_DELETED, KUBE_WATCH_BOOKMARK };
        struct kc_fx *f = *state;
        struct seen s = { 0 };
        char *rv0;

        kubesim_create_namespace(f->c, "watch");
        rv0 = kc_create_cm(f->c, "watch", "before", "0");
        free(kc_create_cm(f->c, "watch", "w", "1"));
        assert_int_equal(kube_patch(f->c,
                                    &(struct kube_patch_opts){ .resource = &KUBE_RES_CONFIGMAPS,
                                                               .ns = "watch",
                                                               .name = "w",
                                                               .subresource = NULL,
                                                               .type = KUBE_PATCH_MERGE,
                                                               .body = "{\"data\":{\"k\":\"2\"}}" },
                                    NULL, &f->e),
                         0);
        assert_int_equal(kube_delete(f->c, &KUBE_RES_CONFIGMAPS, "watch", "w", NULL, &f->e), 0);
        assert_int_equal(kube_watch(f->c, &KUBE_RES_CONFIGMAPS, "watch",
                                    &(struct kube_watch_opts){ .resource_version = rv0,
                                                               .timeout_seconds = 10 },
                                    on_event, &s, &f->e),
                         0);
        assert_int_equal(s.n, ARRAY_SIZE(want));
        for (size_t i = 0; i < ARRAY_SIZE(want); i++)
                assert_int_equal(s.type[i], want[i]);
        assert_string_equal(s.name[0], "w");
        assert_string_equal(s.name[2], "w");
        assert_int_equal(
                kc_count("GET", "/namespaces/watch/configmaps", "allowWatchBookmarks", true), 1);
        free(rv0);
}

static void test_watch__too_old_resource_version_is_gone(void **state)
{
        struct kc_fx *f = *state;
        struct seen s = { 0 };
        char *rv0;

        kubesim_create_namespace(f->c, "expired");
        rv0 = kc_create_cm(f->c, "expired", "e", "1");
        kc_churn(f->c, KC_HISTORY + 5);
        assert_int_equal(kube_watch(f->c, &KUBE_RES_CONFIGMAPS, "expired",
                                    &(struct kube_watch_opts){ .resource_version = rv0,
                                                               .timeout_seconds = 10 },
                                    on_event, &s, &f->e),
                         CM_EGONE);
        assert_int_equal(f->e.http_status, 410);
        assert_string_equal(f->e.reason, "Expired");
        assert_non_null(strstr(f->e.message, "too old resource version"));
        assert_int_equal(s.n, 0);
        /* the sim's fault switch gives the same answer for a fresh version */
        kubesim_faults(&kc_sim, "{\"expireNextWatch\":true}");
        free(rv0);
        rv0 = kc_create_cm(f->c, "expired", "e2", "1");
        assert_int_equal(kube_watch(f->c, &KUBE_RES_CONFIGMAPS, "expired",
                                    &(struct kube_watch_opts){ .resource_version = rv0,
                                                               .timeout_seconds = 10 },
                                    on_event, &s, &f->e),
                         CM_EGONE);
        free(rv0);
}

static void test_watch__event_over_max_event_is_too_big(void **state)
{
        struct kc_fx *f = *state;
        struct seen s = { 0 };
        char *v = kc_big_value(2048);

        kubesim_create_namespace(f->c, "bigwatch");
        free(kc_create_cm(f->c, "bigwatch", "small", "1"));
        free(kc_create_cm(f->c, "bigwatch", "zbig", v));
        assert_int_equal(
                kube_watch(f->c, &KUBE_RES_CONFIGMAPS, "bigwatch",
                           &(struct kube_watch_opts){ .max_event = 1024, .timeout_seconds = 10 },
                           on_event, &s, &f->e),
                CM_ETOOBIG);
        assert_int_equal(s.n, 1); /* the small one came through first */
        free(v);
}

/* Records like on_event but never ends the watch itself (bookmarks come every 0.2 s). */
static int on_event_go_on(void *arg, enum kube_watch_event type, cJSON *obj)
{
        (void)on_event(arg, type, obj);
        return 0;
}

struct watcher {
        struct kube_client *c;
        const char *ns;
        atomic_bool stop;
        struct seen seen;
        struct kube_error e;
        int result;
        pthread_t th;
};

static void *watch_thread(void *arg)
{
        struct watcher *w = arg;

        w->result = kube_watch(w->c, &KUBE_RES_CONFIGMAPS, w->ns,
                               &(struct kube_watch_opts){ .timeout_seconds = 60, .stop = &w->stop },
                               on_event_go_on, &w->seen, &w->e);
        return NULL;
}

/* Starts a watch of ns (holding one object) on a thread; returns once it streams. */
static void watcher_start(struct kc_fx *f, struct watcher *w, const char *ns)
{
        struct timespec ts = { 0, 10 * 1000000L };

        kubesim_create_namespace(f->c, ns);
        free(kc_create_cm(f->c, ns, "s", "1"));
        w->ns = ns;
        w->c = kc_new_client(f, &kc_sim.cfg, 0);
        assert_int_equal(pthread_create(&w->th, NULL, watch_thread, w), 0);
        for (int i = 0; i < 1000 && atomic_load(&w->seen.added) == 0; i++) /* ≤ 10 s */
                nanosleep(&ts, NULL);
        assert_int_equal(atomic_load(&w->seen.added), 1); /* the synthetic ADDED arrived */
}

/* Joins the watch thread, failing if it does not end within 10 s: far below the 60 s the
 * server would keep the stream open. */
static int watcher_join(struct watcher *w)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 10;
        assert_int_equal(pthread_timedjoin_np(w->th, NULL, &ts), 0);
        kube_error_release(&w->e);
        kube_client_free(w->c);
        return w->result;
}

static void test_watch__stop_flag_ends_a_quiet_watch(void **state)
{
        struct watcher w = { 0 };

        watcher_start(*state, &w, "stop");
        atomic_store(&w.stop, true);
        assert_int_equal(watcher_join(&w), 0);
}

static void test_watch__server_closing_the_stream_ends_the_watch(void **state)
{
        struct watcher w = { 0 };

        watcher_start(*state, &w, "drop");
        kubesim_faults(&kc_sim, "{\"dropWatches\":true}");
        assert_int_equal(watcher_join(&w), 0);
        assert_false(atomic_load(&w.stop));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, kc_setup, kc_teardown)
                T(test_watch__events_in_order_from_a_resource_version),
                T(test_watch__too_old_resource_version_is_gone),
                T(test_watch__event_over_max_event_is_too_big),
                T(test_watch__stop_flag_ends_a_quiet_watch),
                T(test_watch__server_closing_the_stream_ends_the_watch),
#undef T
        };

        return cmocka_run_group_tests(tests, kc_group_setup, kc_group_teardown);
}
