/*
 * Unit tests for the MaasMachine's static address (maasmachine_network.c): the real
 * maasmachine_reconcile() and maas_client over the fake transports (reconcile_world.h), on
 * a fake clock. Each row allocates abc123 for a MaasMachine with spec.staticIP and checks
 * what a user would notice: the MAAS calls made or not (link, unlink, release, deploy), the
 * condition and its message, the backoff annotation and the requeue.
 */
#include "../../../reconcile/maasmachine.h"
#include "reconcile_world.h"

#define MM_URL      INFRA_API "/maasmachines/m1"
#define MACHINE_URL CAPI_API "/machines/m1"
#define CLUSTER_URL CAPI_API "/clusters/c1"
#define BOOT_URL    CORE_API "/secrets/m1-bootstrap"
#define RETRY       "maas.infrastructure.cluster.x-k8s.io/static-ip-retry"
#define HOST        "maas.infrastructure.cluster.x-k8s.io/static-ip-host"
#define IFACE       "nodes/abc123/interfaces/"
#define OUR_STAMP \
        "{\"capmaas-cluster\":\"c1\",\"capmaas-namespace\":\"ns1\",\"capmaas-machine\":\"m1\"}"

static const char *node(const char *status)
{
        static char b[1024];

        (void)snprintf(b, sizeof(b),
                       "{\"system_id\":\"abc123\",\"hostname\":\"node-1\",\"fqdn\":\"node-1.maas\","
                       "\"zone\":{\"name\":\"az1\"},\"pool\":{\"name\":\"default\"},"
                       "\"status_name\":\"%s\",\"power_state\":\"off\",\"ip_addresses\":[],"
                       "\"tag_names\":[],\"owner\":\"capmaas\",\"owner_data\":" OUR_STAMP ","
                       "\"boot_interface\":{\"id\":7,\"name\":\"eth0\"}}",
                       status);
        return b;
}

/* eth0 (id 7) with one link of mode (id 70), on 10.0.0.0/24 (gateway 10.0.0.1). */
static const char *iface(const char *mode, const char *ip)
{
        static char b[4][1024];
        static unsigned next;
        char *o = b[next++ % 4];

        (void)snprintf(o, sizeof(b[0]),
                       "{\"id\":7,\"name\":\"eth0\",\"mac_address\":\"52:54:00:00:00:01\","
                       "\"links\":[{\"id\":70,\"mode\":\"%s\"%s%s%s,\"subnet\":{\"id\":3,"
                       "\"cidr\":\"10.0.0.0/24\"}}]}",
                       mode, ip ? ",\"ip_address\":\"" : "", ip ? ip : "", ip ? "\"" : "");
        return o;
}

struct row {
        const char *name;
        const char *spec;     /* the staticIP members */
        const char *retry;    /* the static-ip-retry annotation's value ("%lld" = WALL_S + n) */
        long long retry_in_s; /* its time, relative to WALL_S */
        long link_status;     /* link_subnet's answer: 200, or the refusal */
        const char *link_body;
        bool stale_pass; /* a second pass before the informer has the first one's writes */
        void (*check)(struct world *w);
};

static void put_objects(struct world *w, const struct row *r)
{
        char *b64 = base64_encode("#cloud-config\n", 14);
        char ann[256] = "{}";

        world_put(w, w->p->clusters, CLUSTER_URL, world_cluster(&(struct world_cluster){ 0 }));
        world_put(w, w->p->machines, MACHINE_URL,
                  world_machine(
                          &(struct world_machine){ .name = "m1", .data_secret = "m1-bootstrap" }));
        world_put(w, NULL, BOOT_URL,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"m1-bootstrap\",\"namespace\":\"" NS "\"},\"data\":{\"value\":"
                            "\"%s\"}}",
                            b64));
        if (r->retry)
                (void)snprintf(ann, sizeof(ann), "{\"" RETRY "\":\"%s %lld\"}", r->retry,
                               (long long)WALL_S + r->retry_in_s);
        world_put(w, w->p->maasmachines, MM_URL,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"m1\","
                            "\"namespace\":\"" NS "\",\"uid\":\"uid-m1\",\"generation\":1,"
                            "\"labels\":{\"cluster.x-k8s.io/cluster-name\":\"c1\"},"
                            "\"annotations\":%s,\"finalizers\":[\"" SCHEMA_FINALIZER_MACHINE
                            "\"],\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"Machine\",\"name\":\"m1\",\"uid\":\"uid-machine\"}]},"
                            "\"spec\":{\"image\":\"ubuntu/jammy\",\"staticIP\":{%s}}}",
                            ann, r->spec));
        free(b64);
}

/* MAAS allocating abc123: its interface with the AUTO link at first, a LINK_UP once that is
 * unlinked (what the next read shows), then the STATIC one once linked. */
static void arrange_maas(struct world *w, const struct row *r)
{
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[]");
        maas_route(&w->maas, "POST", "machines/?op=allocate", 200, "%s", node("Allocated"));
        maas_route(&w->maas, "POST", "machines/abc123/?op=set_owner_data", 200, "%s",
                   node("Allocated"));
        maas_route(&w->maas, "PUT", "machines/abc123/", 200, "%s", node("Allocated"));
        maas_route(&w->maas, "POST", "machines/abc123/?op=deploy", 200, "%s", node("Deploying"));
        maas_route(&w->maas, "POST", "machines/abc123/?op=release", 200, "%s", node("Ready"));
        maas_route(&w->maas, "GET", "subnets/", 200,
                   "[{\"id\":3,\"name\":\"prov\",\"cidr\":\"10.0.0.0/24\",\"gateway_ip\":"
                   "\"10.0.0.1\",\"dns_servers\":[\"10.0.0.2\"],\"vlan\":{\"vid\":0}}]");
        maas_route(&w->maas, "GET", IFACE, 200, "[%s]", iface("link_up", NULL));
        maas_route(&w->maas, "GET", IFACE, 200, "[%s]", iface("auto", NULL))->times = 1;
        maas_route(&w->maas, "POST", IFACE "7/?op=unlink_subnet", 200, "%s",
                   iface("link_up", NULL));
        maas_route(&w->maas, "POST", IFACE "7/?op=link_subnet", 200, "%s", iface("auto", NULL));
        /* the STATIC link (newest: asked first; a refusal steps aside after one answer) */
        maas_route(&w->maas, "POST", IFACE "7/?op=link_subnet", r->link_status, "%s",
                   r->link_status == 200 ? iface("static", "10.0.0.50") : r->link_body)
                ->times = 1;
}

static const cJSON *mm(struct world *w)
{
        return world_get(w, MM_URL);
}

static const char *annotation(struct world *w, const char *key)
{
        const cJSON *v =
                cJSON_GetObjectItemCaseSensitive(json_at(mm(w), "metadata.annotations"), key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Refused: released after the AUTO link was put back, no deploy, the condition. */
static void assert_refused(struct world *w, const char *message)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=deploy", NULL), 0);
        assert_string_equal(condition(mm(w), "StaticIPApplied", "status"), "False");
        assert_string_equal(condition(mm(w), "StaticIPApplied", "reason"), "StaticIPFailed");
        assert_string_equal(condition(mm(w), "StaticIPApplied", "message"), message);
        assert_null(json_at(mm(w), "spec.providerID"));
        assert_null(annotation(w, HOST)); /* undone on the machine before its release */
}

static void check_linked_then_deployed(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=unlink_subnet", "id=70"), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=link_subnet",
                                  "mode=STATIC&subnet=3&ip_address=10.0.0.50&default_gateway=true"),
                         1);
        assert_int_equal(requests(&w->maas, "POST", "op=deploy", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 0);
        assert_string_equal(annotation(w, HOST), "abc123 10.0.0.50 10.0.0.0/24 -");
        assert_null(annotation(w, RETRY));
}

static void check_transient_error_releases_with_backoff(struct world *w)
{
        char want[64];

        assert_refused(w, "10.0.0.50 on the boot interface: boom");
        /* the AUTO link came back before the release */
        assert_int_equal(requests(&w->maas, "POST", "op=link_subnet", "mode=AUTO&subnet=3"), 1);
        (void)snprintf(want, sizeof(want), "1 %lld", (long long)WALL_S + 10);
        assert_string_equal(annotation(w, RETRY), want);
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(w->res.after_ms, 10000);
}

static void check_backoff_doubles(struct world *w)
{
        char want[64];

        assert_refused(w, "10.0.0.50 on the boot interface: IP address is already in use.");
        (void)snprintf(want, sizeof(want), "3 %lld", (long long)WALL_S + 40);
        assert_string_equal(annotation(w, RETRY), want);
        assert_int_equal(w->res.after_ms, 40000);
}

static void check_backoff_capped(struct world *w)
{
        char want[64];

        assert_refused(w, "10.0.0.50 on the boot interface: IP address is already in use.");
        (void)snprintf(want, sizeof(want), "10 %lld", (long long)WALL_S + 300);
        assert_string_equal(annotation(w, RETRY), want);
}

static void check_backoff_holds_allocation(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 0);
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(w->res.after_ms, 25000);
}

/* The pass that an event queued during the refusal wakes, on the cache from before it:
 * no second allocation before the backoff, though its object shows none. */
static void check_stale_pass_holds_the_backoff(struct world *w)
{
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 1);
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(w->res.after_ms, 10000);
}

static void check_forbidden_names_the_rule(struct world *w)
{
        assert_refused(w, "10.0.0.50 on the boot interface: MAAS refused (403): only a MAAS "
                          "administrator may change a machine's interfaces");
}

static void check_gateway_refused_before_any_write(struct world *w)
{
        assert_refused(w, "10.0.0.50 on eth0: gateway 10.0.0.254 is not the gateway of MAAS "
                          "subnet 10.0.0.0/24 (10.0.0.1): MAAS gives a static address its "
                          "subnet's gateway");
        assert_int_equal(requests(&w->maas, "POST", "op=unlink_subnet", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "op=link_subnet", NULL), 0);
}

#define SPEC "\"ip\":\"10.0.0.50\",\"cidr\":\"10.0.0.0/24\""

static const struct row rows[] = {
        { .name = "static_ip_linked_then_deployed",
          .spec = SPEC ",\"gateway\":\"10.0.0.1\",\"nameservers\":[\"10.0.0.2\"]",
          .link_status = 200,
          .check = check_linked_then_deployed },
        { .name = "transient_error_on_link_releases_with_backoff",
          .spec = SPEC,
          .link_status = 500,
          .link_body = "boom",
          .check = check_transient_error_releases_with_backoff },
        { .name = "backoff_doubles_per_refusal",
          .spec = SPEC,
          .retry = "2",
          .retry_in_s = -1,
          .link_status = 404,
          .link_body = "IP address is already in use.",
          .check = check_backoff_doubles },
        { .name = "backoff_is_capped_at_5_minutes",
          .spec = SPEC,
          .retry = "9",
          .retry_in_s = 0,
          .link_status = 404,
          .link_body = "IP address is already in use.",
          .check = check_backoff_capped },
        { .name = "backoff_holds_the_next_allocation",
          .spec = SPEC,
          .retry = "1",
          .retry_in_s = 25,
          .link_status = 200,
          .check = check_backoff_holds_allocation },
        { .name = "stale_cache_pass_holds_the_backoff",
          .spec = SPEC,
          .link_status = 404,
          .link_body = "IP address is already in use.",
          .stale_pass = true,
          .check = check_stale_pass_holds_the_backoff },
        { .name = "forbidden_names_the_administrator_rule",
          .spec = SPEC,
          .link_status = 403,
          .link_body = "",
          .check = check_forbidden_names_the_rule },
        { .name = "gateway_not_the_subnets_refused_before_any_write",
          .spec = SPEC ",\"gateway\":\"10.0.0.254\",\"interface\":\"eth0\"",
          .link_status = 200,
          .check = check_gateway_refused_before_any_write },
};

static void run_row(void **state)
{
        const struct row *r = *state;
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);

        put_objects(w, r);
        arrange_maas(w, r);
        w->res = (struct reconcile_result){ .outcome = RECONCILE_DONE };
        w->rc = maasmachine_reconcile(w->w, NS, "m1", &w->res);
        if (r->stale_pass) {
                w->res = (struct reconcile_result){ .outcome = RECONCILE_DONE };
                (void)!maasmachine_reconcile(w->w, NS, "m1", &w->res);
        }
        world_sync(w);
        world_finish(w, r->check);
}

int main(void)
{
        return world_run_rows(rows, ARRAY_SIZE(rows), sizeof(rows[0]), run_row);
}
