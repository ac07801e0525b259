/*
 * Integration: the Event recorder (reconcile/kube_events.c) against kube-sim: an event
 * appears with every field kubectl describe shows; a repeat becomes count 2 on the same
 * Event (one POST, one merge PATCH); a repeat after the 10-minute window (fake clock) or
 * after the Event was deleted makes a new Event; Warning events; cluster-scoped objects get
 * their events in "default"; messages are cut at 1024 bytes on a UTF-8 boundary; the
 * per-object spam filter (25, then one per 5 minutes) and the combining of similar events
 * (10 distinct messages); invalid events and a full queue drop events without blocking.
 *
 * Needs $CAPMAAS_BUILD_DIR/kube-sim. ctest: concurrency
 */
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

#include "buf.h"
#include "clock.h"
#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "kube_events.h"
#include "kubesim.h"
#include "metrics.h"
#include "testutil.h"
#include "xalloc.h"

#define WALL0 1800000000 /* 2027-01-15T08:00:00Z */

/* --- fixture ----------------------------------------------------------------------------- */

struct fx {
        struct kubesim sim;
        struct clock_fake clk;
        struct kube_client *kc; /* the test's own client */
        struct event_recorder *rec;
};

static void recorder_new(struct fx *f, unsigned queue_len)
{
        f->rec = event_recorder_free(f->rec);
        assert_int_equal(
                event_recorder_new(
                        &(struct event_recorder_opts){ .config = &f->sim.cfg,
                                                       .component = "capmaas-controller-manager",
                                                       .host = "node-7",
                                                       .clock = &f->clk.ops,
                                                       .queue_len = queue_len },
                        &f->rec),
                0);
}

static int setup(void **state)
{
        struct fx *f = xcalloc(1, sizeof(*f));

        assert_int_equal(kubesim_start(&f->sim, NULL), 0);
        clock_fake_init(&f->clk, 1000000, WALL0);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &f->sim.cfg }, &f->kc), 0);
        recorder_new(f, 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        f->rec = event_recorder_free(f->rec);
        f->kc = kube_client_free(f->kc);
        kubesim_stop(&f->sim);
        free(f);
        return 0;
}

/* --- helpers ----------------------------------------------------------------------------- */

static cJSON *machine(const char *name)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(o, "metadata");
        char uid[64];

        snprintf(uid, sizeof(uid), "uid-%s", name);
        cJSON_AddStringToObject(o, "apiVersion", "infrastructure.cluster.x-k8s.io/v1beta1");
        cJSON_AddStringToObject(o, "kind", "MaasMachine");
        cJSON_AddStringToObject(md, "name", name);
        cJSON_AddStringToObject(md, "namespace", "team-a");
        cJSON_AddStringToObject(md, "uid", uid);
        cJSON_AddStringToObject(md, "resourceVersion", "42");
        cJSON_AddItemToObject(o, "spec", cJSON_CreateObject());
        return o;
}

static void flush(struct fx *f)
{
        assert_int_equal(event_recorder_flush(f->rec, 10000), 0);
}

/* The Events in ns (a List; caller frees). */
static cJSON *events(struct fx *f, const char *ns)
{
        cJSON *list = NULL;

        assert_int_equal(kube_list(f->kc, &KUBE_RES_EVENTS, ns, NULL, &list, NULL), 0);
        return list;
}

static const cJSON *items(const cJSON *list)
{
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(list, "items");

        assert_true(cJSON_IsArray(it));
        return it;
}

static const char *str_at(const cJSON *o, const char *a, const char *b)
{
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);

        if (b)
                x = cJSON_GetObjectItemCaseSensitive(x, b);
        if (!cJSON_IsString(x))
                fail_msg("%s%s%s is not a string", a, b ? "." : "", b ? b : "");
        return x->valuestring;
}

static int64_t count_of(const cJSON *ev)
{
        int64_t n = -1;

        assert_int_equal(json_get_int64(NULL, ev, "count", &n), 0);
        return n;
}

/* Log entries for events with this method. */
static int event_requests(struct fx *f, const char *method)
{
        return kubesim_count_requests(
                &f->sim, &(struct kubesim_match){ .method = method, .path_has = "/events" });
}

/* --- tests ------------------------------------------------------------------------------- */

static void test_kube_events__event_has_every_field(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-1");
        cJSON *list;
        const cJSON *ev;
        const char *name;

        kubesim_create_namespace(f->kc, "team-a");
        event_record(f->rec, obj, "Normal", "MachineDeployed", "deployed %s on %s", "m-1",
                     "host-3");
        flush(f);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 1);
        ev = cJSON_GetArrayItem(items(list), 0);
        name = str_at(ev, "metadata", "name");
        assert_int_equal(strncmp(name, "m-1.", 4), 0);
        assert_true(strlen(name) > 4 && strspn(name + 4, "0123456789abcdef") == strlen(name + 4));
        assert_string_equal(str_at(ev, "metadata", "namespace"), "team-a");
        assert_string_equal(str_at(ev, "involvedObject", "kind"), "MaasMachine");
        assert_string_equal(str_at(ev, "involvedObject", "apiVersion"),
                            "infrastructure.cluster.x-k8s.io/v1beta1");
        assert_string_equal(str_at(ev, "involvedObject", "name"), "m-1");
        assert_string_equal(str_at(ev, "involvedObject", "namespace"), "team-a");
        assert_string_equal(str_at(ev, "involvedObject", "uid"), "uid-m-1");
        assert_string_equal(str_at(ev, "involvedObject", "resourceVersion"), "42");
        assert_string_equal(str_at(ev, "reason", NULL), "MachineDeployed");
        assert_string_equal(str_at(ev, "message", NULL), "deployed m-1 on host-3");
        assert_string_equal(str_at(ev, "type", NULL), "Normal");
        assert_string_equal(str_at(ev, "source", "component"), "capmaas-controller-manager");
        assert_string_equal(str_at(ev, "source", "host"), "node-7");
        assert_string_equal(str_at(ev, "reportingComponent", NULL), "capmaas-controller-manager");
        assert_string_equal(str_at(ev, "reportingInstance", NULL), "node-7");
        assert_string_equal(str_at(ev, "firstTimestamp", NULL), "2027-01-15T08:00:00Z");
        assert_string_equal(str_at(ev, "lastTimestamp", NULL), "2027-01-15T08:00:00Z");
        assert_int_equal(count_of(ev), 1);
        cJSON_Delete(list);
        cJSON_Delete(obj);
}

static void test_kube_events__repeat_increments_count_on_one_event(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-2");
        cJSON *list;
        const cJSON *ev;

        kubesim_create_namespace(f->kc, "team-a");
        event_record(f->rec, obj, "Normal", "Waiting", "waiting for %s", "MAAS");
        flush(f);
        clock_fake_advance(&f->clk, 90000);
        event_record(f->rec, obj, "Normal", "Waiting", "waiting for %s", "MAAS");
        flush(f);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 1);
        ev = cJSON_GetArrayItem(items(list), 0);
        assert_int_equal(count_of(ev), 2);
        assert_string_equal(str_at(ev, "firstTimestamp", NULL), "2027-01-15T08:00:00Z");
        assert_string_equal(str_at(ev, "lastTimestamp", NULL), "2027-01-15T08:01:30Z");
        assert_int_equal(event_requests(f, "POST"), 1);
        assert_int_equal(event_requests(f, "PATCH"), 1);
        /* a third repeat: count 3 */
        event_record(f->rec, obj, "Normal", "Waiting", "waiting for %s", "MAAS");
        flush(f);
        cJSON_Delete(list);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 1);
        assert_int_equal(count_of(cJSON_GetArrayItem(items(list), 0)), 3);
        cJSON_Delete(list);
        cJSON_Delete(obj);
}

static void test_kube_events__repeat_after_window_is_a_new_event(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-3");
        cJSON *list;

        kubesim_create_namespace(f->kc, "team-a");
        event_record(f->rec, obj, "Normal", "Waiting", "waiting");
        flush(f);
        clock_fake_advance(&f->clk, 10 * 60 * 1000 + 1000);
        event_record(f->rec, obj, "Normal", "Waiting", "waiting");
        flush(f);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 2);
        assert_int_equal(count_of(cJSON_GetArrayItem(items(list), 0)), 1);
        assert_int_equal(count_of(cJSON_GetArrayItem(items(list), 1)), 1);
        cJSON_Delete(list);
        cJSON_Delete(obj);
}

static void test_kube_events__different_message_or_type_is_another_event(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-4");
        cJSON *list;
        const cJSON *ev;
        int warnings = 0;

        kubesim_create_namespace(f->kc, "team-a");
        event_record(f->rec, obj, "Normal", "Deploying", "step 1");
        event_record(f->rec, obj, "Normal", "Deploying", "step 2");
        event_record(f->rec, obj, "Warning", "Deploying", "step 2");
        flush(f);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 3);
        cJSON_ArrayForEach (ev, items(list)) {
                assert_int_equal(count_of(ev), 1);
                if (!strcmp(str_at(ev, "type", NULL), "Warning")) {
                        warnings++;
                        assert_string_equal(str_at(ev, "message", NULL), "step 2");
                }
        }
        assert_int_equal(warnings, 1);
        cJSON_Delete(list);
        cJSON_Delete(obj);
}

static void test_kube_events__deleted_event_is_recreated_on_repeat(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-5");
        cJSON *list;
        char *name;

        kubesim_create_namespace(f->kc, "team-a");
        event_record(f->rec, obj, "Warning", "ReleaseFailed", "MAAS said no");
        flush(f);
        list = events(f, "team-a");
        name = xstrdup(str_at(cJSON_GetArrayItem(items(list), 0), "metadata", "name"));
        cJSON_Delete(list);
        assert_int_equal(kube_delete(f->kc, &KUBE_RES_EVENTS, "team-a", name, NULL, NULL), 0);
        event_record(f->rec, obj, "Warning", "ReleaseFailed", "MAAS said no");
        flush(f);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 1);
        assert_int_equal(count_of(cJSON_GetArrayItem(items(list), 0)), 1);
        assert_string_not_equal(str_at(cJSON_GetArrayItem(items(list), 0), "metadata", "name"),
                                name);
        free(name);
        cJSON_Delete(list);
        cJSON_Delete(obj);
}

static void test_kube_events__cluster_scoped_object_events_go_to_default(void **state)
{
        struct fx *f = *state;
        cJSON *node = cJSON_CreateObject();
        cJSON *md = cJSON_AddObjectToObject(node, "metadata");
        cJSON *list;
        const cJSON *ev;

        cJSON_AddStringToObject(node, "apiVersion", "v1");
        cJSON_AddStringToObject(node, "kind", "Node");
        cJSON_AddStringToObject(md, "name", "worker-1");
        cJSON_AddStringToObject(md, "uid", "uid-n");
        event_record(f->rec, node, "Normal", "Registered", "node registered");
        flush(f);
        list = events(f, "default");
        assert_int_equal(cJSON_GetArraySize(items(list)), 1);
        ev = cJSON_GetArrayItem(items(list), 0);
        assert_string_equal(str_at(ev, "involvedObject", "kind"), "Node");
        assert_null(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(ev, "involvedObject"), "namespace"));
        cJSON_Delete(list);
        cJSON_Delete(node);
}

static void test_kube_events__long_message_cut_on_utf8_boundary(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-6");
        char msg[1100];
        cJSON *list;
        const char *got;

        kubesim_create_namespace(f->kc, "team-a");
        memset(msg, 'a', 1023);
        memcpy(msg + 1023, "\xc3\xa9tail", 6); /* "é" straddles byte 1024 */
        msg[1029] = '\0';
        event_record(f->rec, obj, "Normal", "Long", "%s", msg);
        flush(f);
        list = events(f, "team-a");
        got = str_at(cJSON_GetArrayItem(items(list), 0), "message", NULL);
        assert_int_equal(strlen(got), 1023);
        assert_int_equal(strspn(got, "a"), 1023);
        cJSON_Delete(list);
        cJSON_Delete(obj);
}

static void test_kube_events__invalid_events_are_dropped(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-7");
        cJSON *nameless = cJSON_CreateObject();
        struct metrics *m = NULL;
        struct buf out;
        cJSON *list;

        kubesim_create_namespace(f->kc, "team-a");
        assert_int_equal(metrics_new(&m), 0);
        f->rec = event_recorder_free(f->rec);
        assert_int_equal(event_recorder_new(&(struct event_recorder_opts){ .config = &f->sim.cfg,
                                                                           .component = "capmaas",
                                                                           .clock = &f->clk.ops,
                                                                           .metrics = m },
                                            &f->rec),
                         0);
        event_record(NULL, obj, "Normal", "NoRecorder", "ignored"); /* no-op, no crash */
        event_record(f->rec, obj, "Bogus", "Reason", "bad type");
        event_record(f->rec, obj, "Normal", "", "no reason");
        event_record(f->rec, nameless, "Normal", "Reason", "no object name");
        flush(f);
        assert_int_equal(event_recorder_dropped(f->rec), 3);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 0);
        buf_init(&out, 1 << 20);
        assert_int_equal(metrics_render(m, &out), 0);
        assert_non_null(out.data);
        assert_non_null(strstr(out.data, "capmaas_events_dropped_total 3\n"));
        buf_release(&out);
        f->rec = event_recorder_free(f->rec); /* before the registry it counts into */
        m = metrics_free(m);
        cJSON_Delete(list);
        cJSON_Delete(nameless);
        cJSON_Delete(obj);
}

static void test_kube_events__spam_filter_allows_25_then_one_per_5_minutes(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-9");
        cJSON *other = machine("m-10");
        cJSON *list;

        kubesim_create_namespace(f->kc, "team-a");
        for (int i = 0; i < 28; i++) {
                char reason[16];

                snprintf(reason, sizeof(reason), "Step%d", i); /* nothing to combine */
                event_record(f->rec, obj, "Normal", reason, "step %d", i);
        }
        event_record(f->rec, other, "Normal", "Step", "another object has its own budget");
        flush(f);
        assert_int_equal(event_recorder_dropped(f->rec), 3);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 26);
        cJSON_Delete(list);

        clock_fake_advance(&f->clk, 5 * 60 * 1000);
        event_record(f->rec, obj, "Normal", "Step", "after 5 minutes");
        event_record(f->rec, obj, "Normal", "Step", "still too soon");
        flush(f);
        assert_int_equal(event_recorder_dropped(f->rec), 4);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 27);
        cJSON_Delete(list);
        cJSON_Delete(other);
        cJSON_Delete(obj);
}

static void test_kube_events__ten_distinct_messages_then_combined(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-11");
        cJSON *list;
        const cJSON *ev;
        int combined = 0, single = 0;

        kubesim_create_namespace(f->kc, "team-a");
        for (int i = 0; i < 12; i++)
                event_record(f->rec, obj, "Warning", "ProbeFailed", "attempt %d failed", i);
        event_record(f->rec, obj, "Warning", "OtherReason", "attempt 99 failed");
        flush(f);
        list = events(f, "team-a");
        /* 9 on their own, the 10th to 12th in one combined Event, the other reason alone */
        assert_int_equal(cJSON_GetArraySize(items(list)), 11);
        cJSON_ArrayForEach (ev, items(list)) {
                if (!strncmp(str_at(ev, "message", NULL), "(combined from similar events): ", 32)) {
                        combined++;
                        assert_string_equal(str_at(ev, "message", NULL),
                                            "(combined from similar events): attempt 11 failed");
                        assert_int_equal(count_of(ev), 3);
                        assert_string_equal(str_at(ev, "reason", NULL), "ProbeFailed");
                } else {
                        single++;
                        assert_int_equal(count_of(ev), 1);
                }
        }
        assert_int_equal(combined, 1);
        assert_int_equal(single, 10);
        assert_int_equal(event_recorder_dropped(f->rec), 0);
        cJSON_Delete(list);

        /* after the 10-minute window the messages count afresh */
        clock_fake_advance(&f->clk, 10 * 60 * 1000 + 1000);
        event_record(f->rec, obj, "Warning", "ProbeFailed", "attempt %d failed", 100);
        flush(f);
        list = events(f, "team-a");
        assert_int_equal(cJSON_GetArraySize(items(list)), 12);
        single = 0;
        cJSON_ArrayForEach (ev, items(list)) {
                if (!strcmp(str_at(ev, "message", NULL), "attempt 100 failed"))
                        single++;
        }
        assert_int_equal(single, 1); /* on its own, not combined */
        cJSON_Delete(list);
        cJSON_Delete(obj);
}

static uint64_t real_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_kube_events__full_queue_drops_without_blocking(void **state)
{
        struct fx *f = *state;
        cJSON *obj = machine("m-8");
        cJSON *list;
        uint64_t t0, dropped;

        kubesim_create_namespace(f->kc, "team-a");
        recorder_new(f, 4);
        /* every API call now takes 400 ms: the writer is stuck on its first event */
        kubesim_faults(&f->sim, "{\"delayMs\":400}");
        t0 = real_ms();
        for (int i = 0; i < 50; i++)
                event_record(f->rec, obj, "Normal", "Burst", "event %d", i);
        assert_true(real_ms() - t0 < 300); /* never waited for the server */
        dropped = event_recorder_dropped(f->rec);
        assert_true(dropped >= 45 && dropped <= 46);
        assert_int_equal(event_recorder_flush(f->rec, 1), CM_ETIMEDOUT);
        kubesim_faults(&f->sim, "{\"delayMs\":0}");
        flush(f);
        list = events(f, "team-a");
        assert_int_equal((uint64_t)cJSON_GetArraySize(items(list)), 50 - dropped);
        cJSON_Delete(list);
        cJSON_Delete(obj);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_kube_events__event_has_every_field, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_kube_events__repeat_increments_count_on_one_event, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_kube_events__repeat_after_window_is_a_new_event, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_kube_events__different_message_or_type_is_another_event, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_kube_events__deleted_event_is_recreated_on_repeat, setup, teardown),
                cmocka_unit_test_setup_teardown(
                        test_kube_events__cluster_scoped_object_events_go_to_default, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(test_kube_events__long_message_cut_on_utf8_boundary,
                                                setup, teardown),
                cmocka_unit_test_setup_teardown(test_kube_events__invalid_events_are_dropped, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(
                        test_kube_events__spam_filter_allows_25_then_one_per_5_minutes, setup,
                        teardown),
                cmocka_unit_test_setup_teardown(
                        test_kube_events__ten_distinct_messages_then_combined, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kube_events__full_queue_drops_without_blocking,
                                                setup, teardown),
        };

        return cmocka_run_group_tests_name("kube_events", tests, NULL, NULL);
}
