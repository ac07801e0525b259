/*
 * Unit tests for the MaasRemediation reconciler (docs/remediation.md): the real
 * maasremediation_reconcile() over the fake MAAS and Kubernetes APIs (reconcile_world.h),
 * in both Cluster API versions. What a user would notice: the MAAS calls in order (power
 * off, confirmed off, power on) or none at all when remediation is refused, the phase,
 * retryCount and conditions written, and the Machine handed back (OwnerRemediated False)
 * once retryLimit cycles did not bring the Node back.
 */
#include "../../../reconcile/maasremediation.h"
#include "reconcile_world.h"
#include "rfc3339.h"

#define REM_URL     INFRA_API "/maasremediations/m1"
#define MM_URL      INFRA_API "/maasmachines/m1"
#define CLUSTER_URL CAPI_API "/clusters/c1"
#define NODE_URL    WORKLOAD "/api/v1/nodes/node-1"
#define SID         "abc123"

struct row {
        const char *name;
        const char *power_type; /* MAAS's; NULL = "ipmi" */
        bool paused, machine_deleting, no_system_id;
        int retry_limit;
        /* the Node's Ready: "True" or "False", transitioned this many seconds after the
         * power-on (negative: before it) */
        const char *ready;
        int ready_after_s;
        int advance_s; /* seconds between the first pass and the second */
        /* expected */
        size_t power_offs, power_ons;
        const char *phase1, *phase2;
        const char *allowed_reason; /* RemediationAllowed's reason after the first pass */
        bool handed_back;
};

static const char *node_json(const char *type)
{
        static char b[1024];

        (void)snprintf(b, sizeof(b),
                       "{\"system_id\":\"" SID "\",\"hostname\":\"node-1\",\"status\":6,"
                       "\"status_name\":\"Deployed\",\"power_state\":\"on\",\"power_type\":"
                       "\"%s\",\"zone\":{\"name\":\"az1\"},\"pool\":{\"name\":\"default\"},"
                       "\"cpu_count\":4,\"memory\":8192,\"tag_names\":[],\"ip_addresses\":[]}",
                       type);
        return b;
}

static void put_node(struct world *w, const char *ready, int64_t at)
{
        char ts[RFC3339_LEN];

        rfc3339_format((time_t)at, ts);
        world_put(w, NULL, NODE_URL,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
                            "\"node-1\"},\"status\":{\"conditions\":[{\"type\":\"Ready\","
                            "\"status\":\"%s\",\"lastTransitionTime\":\"%s\"}]}}",
                            ready, ts));
}

/* The Machine where a write reaches it: under the served version. */
static const char *machine_url(void)
{
        static char url[256];

        (void)snprintf(url, sizeof(url),
                       MGMT "/apis/cluster.x-k8s.io/%s/namespaces/" NS "/machines/m1", world_capi);
        return url;
}

static void nothing_more(struct world *w)
{
        (void)w;
}

static void arrange(struct world *w, const struct row *r)
{
        cJSON *m = world_machine(&(struct world_machine){ .name = "m1", .node = "node-1" });

        assert_int_equal(provider_new_remediation_informer(w->p), 0);
        if (r->machine_deleting)
                json_set_string(json_child_object(m, "metadata", NULL), "deletionTimestamp",
                                "2023-11-14T00:00:00Z");
        world_put(w, w->p->clusters, CLUSTER_URL,
                  world_cluster(&(struct world_cluster){ .paused = r->paused }));
        world_put(w, w->p->machines, machine_url(), m);
        world_put(w, w->p->maasmachines, MM_URL,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"m1\","
                            "\"namespace\":\"" NS "\"},\"spec\":{%s\"image\":\"u\","
                            "\"minCPU\":1,\"minMemory\":1}}",
                            r->no_system_id ? "" : "\"systemID\":\"" SID "\","));
        world_put(w, w->p->maasremediations, REM_URL,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasRemediation\",\"metadata\":{\"name\":\"m1\","
                            "\"namespace\":\"" NS "\",\"uid\":\"uid-r1\",\"ownerReferences\":"
                            "[{\"apiVersion\":\"cluster.x-k8s.io/%s\",\"kind\":\"Machine\","
                            "\"name\":\"m1\",\"uid\":\"uid-machine\"}]},\"spec\":{\"strategy\":"
                            "{\"type\":\"Reboot\",\"retryLimit\":%d,\"timeout\":\"60s\"}}}",
                            world_capi, r->retry_limit));
        world_put_kubeconfig(w, "c1");
        put_node(w, "False", WALL_S - 600);
        maas_route(&w->maas, "GET", "machines/" SID "/", 200, "%s",
                   node_json(r->power_type ? r->power_type : "ipmi"));
        maas_route(&w->maas, "POST", "machines/" SID "/?op=power_off", 200, "%s",
                   node_json("ipmi"));
        maas_route(&w->maas, "GET", "machines/" SID "/?op=query_power_state", 200,
                   "{\"state\":\"off\"}");
        maas_route(&w->maas, "POST", "machines/" SID "/?op=power_on", 200, "%s", node_json("ipmi"));
}

static void run_pass(struct world *w)
{
        w->res = (struct reconcile_result){ 0 };
        w->rc = maasremediation_reconcile(w->w, NS, "m1", &w->res);
        assert_int_equal(w->rc, 0);
        world_sync(w);
}

static const char *phase(struct world *w)
{
        const char *p = json_find_str(world_get(w, REM_URL), "status", "phase", NULL);

        return p ? p : "";
}

static void run_row(void **state)
{
        const struct row *r = *state;
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        const cJSON *rem;
        long off, query, on;

        arrange(w, r);
        run_pass(w);
        rem = world_get(w, REM_URL);
        assert_true(has_finalizer(rem, SCHEMA_FINALIZER_REMEDIATION));
        assert_string_equal(phase(w), r->phase1);
        if (r->allowed_reason)
                assert_string_equal(condition(rem, REMEDIATION_COND_ALLOWED, "reason"),
                                    r->allowed_reason);
        if (r->ready) {
                put_node(w, r->ready, WALL_S + r->ready_after_s);
                clock_fake_advance(&w->clock, (uint64_t)r->advance_s * 1000);
                run_pass(w);
        }
        if (r->phase2)
                assert_string_equal(phase(w), r->phase2);
        assert_int_equal(requests(&w->maas, "POST", "op=power_off", NULL), r->power_offs);
        assert_int_equal(requests(&w->maas, "POST", "op=power_on", NULL), r->power_ons);
        if (r->power_ons) { /* off, confirmed off, on: in that order */
                off = request_at(&w->maas, 0, "POST", "op=power_off");
                query = request_at(&w->maas, (size_t)off, "GET", "op=query_power_state");
                on = request_at(&w->maas, (size_t)query, "POST", "op=power_on");
                assert_true(off >= 0 && query > off && on > query);
                assert_int_equal(
                        json_find(world_get(w, REM_URL), "status", "retryCount", NULL)->valueint,
                        (int)r->power_ons);
        }
        assert_int_equal(condition(world_get(w, machine_url()), REMEDIATION_COND_OWNER, "status") !=
                                 NULL,
                         r->handed_back);
        if (r->handed_back) {
                assert_string_equal(
                        condition(world_get(w, machine_url()), REMEDIATION_COND_OWNER, "reason"),
                        REMEDIATION_REASON_WAITING);
                assert_string_equal(
                        condition(world_get(w, machine_url()), REMEDIATION_COND_OWNER, "status"),
                        "False");
        }
        world_finish(w, nothing_more);
}

static const struct row rows[] = {
        { .name = "one power cycle, the Node Ready again: Succeeded",
          .retry_limit = 2,
          .ready = "True",
          .ready_after_s = 5,
          .advance_s = 10,
          .power_offs = 1,
          .power_ons = 1,
          .phase1 = SCHEMA_REMEDIATION_WAITING,
          .phase2 = SCHEMA_REMEDIATION_SUCCEEDED,
          .allowed_reason = "Allowed" },
        { .name = "a Ready from before the power-on is not the Node coming back",
          .retry_limit = 2,
          .ready = "True",
          .ready_after_s = -30,
          .advance_s = 10,
          .power_offs = 1,
          .power_ons = 1,
          .phase1 = SCHEMA_REMEDIATION_WAITING,
          .phase2 = SCHEMA_REMEDIATION_WAITING },
        { .name = "the Node still NotReady after the timeout: the next power cycle",
          .retry_limit = 2,
          .ready = "False",
          .ready_after_s = 1,
          .advance_s = 61,
          .power_offs = 2,
          .power_ons = 2,
          .phase1 = SCHEMA_REMEDIATION_WAITING,
          .phase2 = SCHEMA_REMEDIATION_WAITING },
        { .name = "retryLimit cycles done: the Machine is handed back to Cluster API",
          .retry_limit = 1,
          .ready = "False",
          .ready_after_s = 1,
          .advance_s = 61,
          .power_offs = 1,
          .power_ons = 1,
          .phase1 = SCHEMA_REMEDIATION_WAITING,
          .phase2 = SCHEMA_REMEDIATION_DELETING,
          .handed_back = true },
        { .name = "retryLimit 0: no power call, the Machine is handed back at once",
          .retry_limit = 0,
          .phase1 = SCHEMA_REMEDIATION_DELETING,
          .handed_back = true },
        { .name = "a manual power type is refused with no power call",
          .power_type = "manual",
          .retry_limit = 2,
          .phase1 = SCHEMA_REMEDIATION_FAILED,
          .allowed_reason = "PowerTypeNotCyclable" },
        { .name = "a Machine being deleted is refused with no power call",
          .machine_deleting = true,
          .retry_limit = 2,
          .phase1 = SCHEMA_REMEDIATION_FAILED,
          .allowed_reason = "MachineDeleting" },
        { .name = "a paused Cluster holds the remediation with no power call",
          .paused = true,
          .retry_limit = 2,
          .phase1 = "",
          .allowed_reason = SCHEMA_REASON_PAUSED },
        { .name = "a MaasMachine without a MAAS machine is refused",
          .no_system_id = true,
          .retry_limit = 2,
          .phase1 = SCHEMA_REMEDIATION_FAILED,
          .allowed_reason = "NoMAASMachine" },
};

/* Deleted while Waiting (the MachineHealthCheck found the Node healthy): the outcome is
 * written before the finalizer goes. */
static void test_remediation__deleted_while_waiting_ends_succeeded(void **state)
{
        const struct row r = { .name = "deleted", .retry_limit = 2 };
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        cJSON *obj;

        (void)state;
        arrange(w, &r);
        run_pass(w);
        assert_string_equal(phase(w), SCHEMA_REMEDIATION_WAITING);
        put_node(w, "True", WALL_S + 3);
        obj = cJSON_Duplicate(world_get(w, REM_URL), true);
        json_set_string(json_child_object(obj, "metadata", NULL), "deletionTimestamp",
                        "2023-11-14T22:13:30Z");
        world_put(w, w->p->maasremediations, REM_URL, obj);
        run_pass(w);
        assert_int_equal(requests(&w->kube, "PATCH", "maasremediations/m1/status",
                                  "\"phase\":\"Succeeded\""),
                         1);
        assert_null(world_get(w, REM_URL)); /* the finalizer went: gone */
        assert_int_equal(requests(&w->maas, "POST", "op=power_on", NULL), 1);
        world_finish(w, nothing_more);
}

/* The cache still holds the object as it was before the pass that power cycled (its watch
 * event not delivered yet): the next pass must not power cycle again. */
static void test_remediation__a_stale_cache_does_not_cycle_twice(void **state)
{
        const struct row r = { .name = "stale", .retry_limit = 2 };
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        cJSON *before;

        (void)state;
        arrange(w, &r);
        before = cJSON_Duplicate(world_get(w, REM_URL), true);
        run_pass(w);
        assert_string_equal(phase(w), SCHEMA_REMEDIATION_WAITING);
        assert_int_equal(informer_feed_event(w->p->maasremediations, KUBE_WATCH_MODIFIED, before),
                         0);
        w->res = (struct reconcile_result){ 0 };
        assert_int_equal(maasremediation_reconcile(w->w, NS, "m1", &w->res), 0);
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(requests(&w->maas, "POST", "op=power_off", NULL), 1);
        world_sync(w); /* the watch catches up: Waiting, retryCount 1 */
        run_pass(w);
        assert_int_equal(requests(&w->maas, "POST", "op=power_off", NULL), 1);
        assert_string_equal(phase(w), SCHEMA_REMEDIATION_WAITING);
        world_finish(w, nothing_more);
}

/* The same after the outcome: a pass on a cache that still shows Waiting neither hands the
 * Machine back nor writes the outcome (nor counts it) a second time. */
static void test_remediation__a_stale_cache_does_not_end_twice(void **state)
{
        const struct row r = { .name = "stale end", .retry_limit = 1 };
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        cJSON *waiting;
        size_t writes_before;

        (void)state;
        arrange(w, &r);
        run_pass(w);
        assert_string_equal(phase(w), SCHEMA_REMEDIATION_WAITING);
        waiting = cJSON_Duplicate(world_get(w, REM_URL), true);
        clock_fake_advance(&w->clock, 61000);
        run_pass(w);
        assert_string_equal(phase(w), SCHEMA_REMEDIATION_DELETING);
        writes_before = requests(&w->kube, "PATCH", "maasremediations/m1/status", NULL);
        assert_int_equal(informer_feed_event(w->p->maasremediations, KUBE_WATCH_MODIFIED, waiting),
                         0);
        w->res = (struct reconcile_result){ 0 };
        assert_int_equal(maasremediation_reconcile(w->w, NS, "m1", &w->res), 0);
        assert_int_equal(requests(&w->kube, "PATCH", "maasremediations/m1/status", NULL),
                         writes_before);
        assert_int_equal(requests(&w->maas, "POST", "op=power_off", NULL), 1);
        world_finish(w, nothing_more);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_remediation__deleted_while_waiting_ends_succeeded),
                cmocka_unit_test(test_remediation__a_stale_cache_does_not_cycle_twice),
                cmocka_unit_test(test_remediation__a_stale_cache_does_not_end_twice),
        };
        int failed = world_run_rows(rows, ARRAY_SIZE(rows), sizeof(rows[0]), run_row);

        return failed + cmocka_run_group_tests(tests, NULL, NULL);
}
