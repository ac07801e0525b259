/*
 * Unit tests for the MaasCluster reconciler: the real maascluster_reconcile() with the real
 * maas_client and kube_client over fake transports (reconcile_world.h), one thread, a fake
 * clock. Table-driven: each row arranges the objects and MAAS's DNS records, runs passes
 * and checks the MAAS requests and the MaasCluster as written.
 */
#include "../../../reconcile/maascluster.h"
#include "reconcile_world.h"

#define MC_URL      INFRA_API "/maasclusters/c1"
#define CLUSTER_URL CAPI_API "/clusters/c1"
#define DNS_NAME    "c1-a1b2c3.maas"
#define WL_NS_URL   WORKLOAD "/api/v1/namespaces/kube-system"

struct objects {
        bool finalizer, deleting, paused, user_endpoint, api_down;
        const char *dns_name;    /* status.network.dnsName already persisted */
        const char *record;      /* the dns-record annotation, or NULL */
        const char *uid;         /* metadata.uid; NULL = uid-mc1 (a moved object has another) */
        const char *endpoint;    /* the Cluster's spec.controlPlaneEndpoint.host, or NULL */
        bool delete_for_move;    /* clusterctl's annotation */
        bool managed_by;         /* cluster.x-k8s.io/managed-by */
        unsigned control_planes; /* healthy control planes 10.0.0.1, .2 ... */
        bool worker;             /* plus a worker machine 10.0.0.9 */
        /* the reference's MaasCluster without its status (after clusterctl move): the
         * endpoint host, on it and on the Cluster, is its record's name */
        bool reference_no_status;
        bool unreported; /* the machines hold MAAS machines but have no status (moved) */
};

static void put_machine(struct world *w, const char *name, const char *ip, bool cp, bool unreported)
{
        char url[256], status[256];

        (void)snprintf(url, sizeof(url), INFRA_API "/maasmachines/%s", name);
        (void)snprintf(status, sizeof(status),
                       ",\"status\":{\"machineState\":\"Deployed\",\"machinePowered\":true,"
                       "\"addresses\":[{\"type\":\"ExternalIP\",\"address\":\"%s\"}]}",
                       ip);
        world_put(w, w->p->maasmachines, url,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"%s\","
                            "\"namespace\":\"" NS "\",\"labels\":{\"cluster.x-k8s.io/"
                            "cluster-name\":\"c1\"%s}},\"spec\":{\"systemID\":\"sys-%s\"}%s}",
                            name, cp ? ",\"cluster.x-k8s.io/control-plane\":\"\"" : "", name,
                            unreported ? "" : status));
}

static void put_objects(struct world *w, const struct objects *o)
{
        char status[256] = "", annotations[512];

        world_put(w, w->p->clusters, CLUSTER_URL,
                  world_cluster(&(struct world_cluster){
                          .paused = o->paused,
                          .endpoint_host = o->user_endpoint         ? "api.example.com"
                                           : o->reference_no_status ? DNS_NAME
                                                                    : o->endpoint,
                          .api_port = 6443 }));
        (void)snprintf(annotations, sizeof(annotations), "{\"note\":\"x\"%s%s%s%s%s}",
                       o->record ? ",\"" RECONCILER_ANNOTATION_DNS_RECORD "\":\"" : "",
                       o->record ? o->record : "", o->record ? "\"" : "",
                       o->delete_for_move ? ",\"" RECONCILER_ANNOTATION_DELETE_FOR_MOVE "\":\"\""
                                          : "",
                       o->managed_by ? ",\"" SCHEMA_ANNOTATION_MANAGED_BY "\":\"someone\"" : "");
        if (o->dns_name)
                (void)snprintf(status, sizeof(status),
                               ",\"status\":{\"network\":{\"dnsName\":"
                               "\"%s\"}}",
                               o->dns_name);
        world_put(w, w->p->maasclusters, MC_URL,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasCluster\",\"metadata\":{\"name\":\"c1\","
                            "\"namespace\":\"" NS "\",\"uid\":\"%s\",\"generation\":1,"
                            "\"labels\":{\"cluster.x-k8s.io/cluster-name\":\"c1\"},"
                            "\"annotations\":%s,"
                            "\"finalizers\":[%s]%s,\"ownerReferences\":[{\"apiVersion\":"
                            "\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\",\"name\":\"c1\","
                            "\"uid\":\"uid-c1\"}]},\"spec\":{\"dnsDomain\":\"maas\","
                            "\"failureDomains\":[\"az1\",\"az2\"]%s}%s}",
                            o->uid ? o->uid : "uid-mc1", annotations,
                            o->finalizer || o->deleting ? "\"" SCHEMA_FINALIZER_CLUSTER "\"" : "",
                            o->deleting ? ",\"deletionTimestamp\":\"2023-11-14T22:13:00Z\"" : "",
                            o->reference_no_status
                                    ? ",\"controlPlaneEndpoint\":{\"host\":\"" DNS_NAME
                                      "\",\"port\":6443}"
                                    : "",
                            status));
        for (unsigned i = 0; i < o->control_planes; i++) {
                char name[24], ip[24];

                (void)snprintf(name, sizeof(name), "cp%u", i + 1);
                (void)snprintf(ip, sizeof(ip), "10.0.0.%u", i + 1);
                put_machine(w, name, ip, true, o->unreported);
        }
        if (o->worker)
                put_machine(w, "w1", "10.0.0.9", false, o->unreported);
        world_put_kubeconfig(w, "c1");
        if (o->api_down)
                w->kube.refuse = WORKLOAD;
        else
                world_put(w, NULL, WL_NS_URL,
                          test_json("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\","
                                    "\"metadata\":{\"name\":\"kube-system\"}}"));
}

static const cJSON *mc(struct world *w)
{
        return world_get(w, MC_URL);
}

static const char *record_annotation(struct world *w)
{
        return json_find_str(mc(w), "metadata", "annotations", RECONCILER_ANNOTATION_DNS_RECORD,
                             NULL);
}

static void no_record(struct world *w)
{
        maas_route(&w->maas, "GET", "dnsresources/?fqdn=" DNS_NAME, 200, "[]");
        maas_route(&w->maas, "POST", "dnsresources/", 200,
                   "{\"id\":5,\"fqdn\":\"" DNS_NAME "\",\"address_ttl\":10,\"ip_addresses\":[]}");
}

static void record_with_one(struct world *w)
{
        maas_route(&w->maas, "GET", "dnsresources/?fqdn=" DNS_NAME, 200,
                   "[{\"id\":5,\"fqdn\":\"" DNS_NAME "\",\"address_ttl\":10,"
                   "\"ip_addresses\":[{\"ip\":\"10.0.0.1\"}]}]");
        maas_route(&w->maas, "PUT", "dnsresources/5/", 200,
                   "{\"id\":5,\"fqdn\":\"" DNS_NAME "\",\"address_ttl\":10,\"ip_addresses\":[]}");
        maas_route(&w->maas, "DELETE", "dnsresources/5/", 204, "%s", "");
}

struct row {
        const char *name;
        struct objects objects;
        void (*arrange)(struct world *w);
        void (*between)(struct world *w); /* after the first of two passes, or NULL */
        void (*check)(struct world *w);
};

/* the finalizer comes first, before anything else happens */
static void check_finalizer(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_true(has_finalizer(mc(w), SCHEMA_FINALIZER_CLUSTER));
        assert_int_equal(w->maas.n_reqs, 0);
        assert_null(json_at(mc(w), "status.network.dnsName"));
}

/* the record's name is written to status before the record exists in MAAS */
static void check_name_first(struct world *w)
{
        const char *name = json_at_str(mc(w), "status.network.dnsName");
        unsigned hex;
        char rest[32];

        assert_int_equal(w->rc, 0);
        assert_non_null(name);
        assert_int_equal(strlen(name), strlen("c1-a1b2c3.maas"));
        assert_int_equal(sscanf(name, "c1-%6x.%31s", &hex, rest), 2);
        assert_string_equal(rest, "maas");
        assert_non_null(record_annotation(w)); /* where clusterctl move copies it */
        assert_string_equal(record_annotation(w), name);
        assert_int_equal(w->maas.n_reqs, 0); /* no record yet */
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_string_equal(condition(mc(w), SCHEMA_COND_LOAD_BALANCER_READY, "reason"),
                            SCHEMA_REASON_WAIT_FOR_DNS_NAME);
}

/* A pass that reads the MaasCluster before its own write of the name reached the cache
 * (the informer lags) names the same record: no second name, no second record. */
static char first_name[64];

static void stale_cache(struct world *w)
{
        cJSON *stale = cJSON_Duplicate(mc(w), true);

        (void)snprintf(first_name, sizeof(first_name), "%s",
                       json_at_str(mc(w), "status.network.dnsName"));
        cJSON_DeleteItemFromObjectCaseSensitive(stale, "status");
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItem(stale, "metadata"),
                                                "annotations");
        assert_int_equal(informer_feed_event(w->p->maasclusters, KUBE_WATCH_MODIFIED, stale), 0);
}

static void check_same_name(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_true(first_name[0] != '\0');
        assert_string_equal(json_at_str(mc(w), "status.network.dnsName"), first_name);
        assert_string_equal(record_annotation(w), first_name);
        assert_int_equal(requests(&w->maas, "POST", "dnsresources/", ""), 0);
}

/* the record holds the control planes' IPs (not the worker's); endpoint then ready */
static void check_record_created(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "dnsresources/",
                                  "fqdn=" DNS_NAME
                                  "&address_ttl=10&ip_addresses=10.0.0.1 10.0.0.2"),
                         1);
        assert_string_equal(json_at_str(mc(w), "spec.controlPlaneEndpoint.host"), DNS_NAME);
        assert_int_equal(json_at(mc(w), "spec.controlPlaneEndpoint.port")->valueint, 6443);
        assert_true(cJSON_IsTrue(json_at(mc(w), "status.ready")));
        assert_string_equal(condition(mc(w), SCHEMA_COND_LOAD_BALANCER_READY, "status"),
                            SCHEMA_CONDITION_TRUE);
        assert_string_equal(condition(mc(w), SCHEMA_COND_API_SERVER_AVAILABLE, "status"),
                            SCHEMA_CONDITION_TRUE);
        assert_string_equal(condition(mc(w), SCHEMA_COND_READY, "status"), SCHEMA_CONDITION_TRUE);
        assert_string_equal(json_at_str(mc(w), "status.failureDomains.1.name"), "az2");
        assert_string_equal(condition(mc(w), SCHEMA_COND_PAUSED, "status"), SCHEMA_CONDITION_FALSE);
        assert_string_equal(condition(mc(w), SCHEMA_COND_PAUSED, "reason"),
                            SCHEMA_REASON_NOT_PAUSED);
}

static void check_record_updated(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "dnsresources/", NULL), 0);
        assert_int_equal(
                requests(&w->maas, "PUT", "dnsresources/5/", "ip_addresses=10.0.0.1 10.0.0.2"), 1);
}

static void check_record_steady(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(writes(&w->maas), 0); /* the set is right: nothing written */
        assert_true(cJSON_IsTrue(json_at(mc(w), "status.ready")));
}

/* The record as read is answer enough for --machine-refresh-interval (60 s here): a pass
 * 10 s after the first reads nothing; a pass after the interval reads MAAS again and puts
 * back the address someone took out of the record meanwhile. */
static void ten_seconds_on(struct world *w)
{
        clock_fake_advance(&w->clock, 10000);
}

static void check_record_read_once(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "GET", "dnsresources/", NULL), 1);
        assert_int_equal(writes(&w->maas), 0);
        assert_true(cJSON_IsTrue(json_at(mc(w), "status.ready")));
}

static void drift_after_the_interval(struct world *w)
{
        maas_route(&w->maas, "GET", "dnsresources/?fqdn=" DNS_NAME, 200,
                   "[{\"id\":5,\"fqdn\":\"" DNS_NAME "\",\"address_ttl\":10,"
                   "\"ip_addresses\":[]}]");
        clock_fake_advance(&w->clock, 60000);
}

static void check_record_read_again(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "GET", "dnsresources/", NULL), 2);
        assert_int_equal(requests(&w->maas, "PUT", "dnsresources/5/", "10.0.0.1"), 1);
}

/* an endpoint the user set on the Cluster is used as is: no DNS record at all */
static void check_user_endpoint(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_string_equal(json_at_str(mc(w), "spec.controlPlaneEndpoint.host"),
                            "api.example.com");
        assert_true(cJSON_IsTrue(json_at(mc(w), "status.ready")));
}

/* the reference's MaasCluster after a move: its record is adopted by the name its endpoint
 * holds (looked up, neither created nor changed), not taken for a host the user set */
static void check_reference_record_adopted(struct world *w)
{
        const char *msg;

        assert_int_equal(w->rc, 0);
        assert_string_equal(json_at_str(mc(w), "status.network.dnsName"), DNS_NAME);
        assert_string_equal(json_at_str(mc(w), "spec.controlPlaneEndpoint.host"), DNS_NAME);
        assert_int_equal(requests(&w->maas, "GET", "dnsresources/?fqdn=" DNS_NAME, NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "dnsresources/", NULL), 0);
        assert_int_equal(requests(&w->maas, "PUT", "dnsresources/", NULL), 0);
        msg = condition(mc(w), SCHEMA_COND_LOAD_BALANCER_READY, "message");
        assert_true(!msg || strcmp(msg, "using the endpoint set on the Cluster") != 0);
        assert_true(cJSON_IsTrue(json_at(mc(w), "status.ready")));
}

/* the workload API does not let us in: endpoint set, but not Ready, and probed again */
static void check_api_down(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_string_equal(condition(mc(w), SCHEMA_COND_API_SERVER_AVAILABLE, "status"),
                            SCHEMA_CONDITION_FALSE);
        assert_string_equal(condition(mc(w), SCHEMA_COND_READY, "status"), SCHEMA_CONDITION_FALSE);
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(w->res.after_ms, 2000);
}

/* delete waits for the MaasMachines, then deletes the record, then the finalizer goes */
static void delete_between(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "DELETE", "dnsresources/", NULL), 0);
        assert_non_null(mc(w));
        assert_true(has_finalizer(mc(w), SCHEMA_FINALIZER_CLUSTER));
        assert_int_equal(w->res.after_ms, 10000);
        /* while machines are still going, Ready says so, with the count */
        assert_string_equal(condition(mc(w), SCHEMA_COND_READY, "status"), SCHEMA_CONDITION_FALSE);
        assert_string_equal(condition(mc(w), SCHEMA_COND_READY, "reason"), "Deleting");
        assert_string_equal(condition(mc(w), SCHEMA_COND_READY, "message"),
                            "waiting for 1 MaasMachine to be deleted");
        world_delete(w, INFRA_API "/maasmachines/cp1");
}

static void check_deleted(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "DELETE", "dnsresources/5/", NULL), 1);
        assert_null(mc(w)); /* finalizer removed */
}

/* pause: Paused condition, nothing asked of or written to MAAS */
static void check_paused(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_string_equal(condition(mc(w), SCHEMA_COND_PAUSED, "status"), SCHEMA_CONDITION_TRUE);
        assert_string_equal(condition(mc(w), SCHEMA_COND_PAUSED, "reason"), SCHEMA_REASON_PAUSED);
        assert_null(json_at(mc(w), "spec.controlPlaneEndpoint"));
}

/* clusterctl move deletes the source with delete-for-move: the record stays in MAAS with
 * its addresses (the target owns it now), only the finalizer goes, and the MaasMachines
 * left are not waited for */
static void check_kept_for_move(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "DELETE", "dnsresources/", NULL), 0);
        assert_int_equal(writes(&w->maas), 0);
        assert_null(mc(w)); /* finalizer removed */
}

/* a paused delete does nothing (no MAAS call, finalizer kept) until the Cluster is unpaused */
static void paused_delete_between(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_non_null(mc(w));
        assert_true(has_finalizer(mc(w), SCHEMA_FINALIZER_CLUSTER));
        assert_string_equal(condition(mc(w), SCHEMA_COND_PAUSED, "status"), SCHEMA_CONDITION_TRUE);
        world_put(w, w->p->clusters, CLUSTER_URL,
                  world_cluster(&(struct world_cluster){ .api_port = 6443 }));
}

static void check_deleted_after_unpause(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "DELETE", "dnsresources/5/", NULL), 1);
        assert_null(mc(w));
}

/* cluster.x-k8s.io/managed-by: another controller's; nothing read, nothing written */
static void check_managed_by(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_int_equal(writes(&w->kube), 0);
        assert_false(has_finalizer(mc(w), SCHEMA_FINALIZER_CLUSTER));
}

/* after clusterctl move: a new UID, no status, the Cluster's endpoint is our record (copied
 * with spec), the MaasMachines have not reported yet. The record is found by the annotated
 * name and is ours (not a user-set endpoint): no create, no update that would drop an
 * address, no delete; the endpoint and status are rebuilt from it */
static void record_with_two(struct world *w)
{
        maas_route(&w->maas, "GET", "dnsresources/?fqdn=" DNS_NAME, 200,
                   "[{\"id\":5,\"fqdn\":\"" DNS_NAME "\",\"address_ttl\":10,"
                   "\"ip_addresses\":[{\"ip\":\"10.0.0.1\"},{\"ip\":\"10.0.0.2\"}]}]");
        maas_route(&w->maas, "PUT", "dnsresources/5/", 200,
                   "{\"id\":5,\"fqdn\":\"" DNS_NAME "\",\"address_ttl\":10,\"ip_addresses\":[]}");
        maas_route(&w->maas, "POST", "dnsresources/", 200,
                   "{\"id\":6,\"fqdn\":\"other\",\"address_ttl\":10,\"ip_addresses\":[]}");
}

static void check_adopted_after_move(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "GET", "dnsresources/?fqdn=" DNS_NAME, NULL), 1);
        assert_int_equal(writes(&w->maas), 0); /* no create, no PUT, no delete */
        assert_string_equal(json_at_str(mc(w), "status.network.dnsName"), DNS_NAME);
        assert_string_equal(record_annotation(w), DNS_NAME);
        assert_string_equal(json_at_str(mc(w), "spec.controlPlaneEndpoint.host"), DNS_NAME);
        assert_string_equal(condition(mc(w), SCHEMA_COND_LOAD_BALANCER_READY, "status"),
                            SCHEMA_CONDITION_TRUE);
        assert_string_equal(condition(mc(w), SCHEMA_COND_LOAD_BALANCER_READY, "message"), "");
        assert_true(cJSON_IsTrue(json_at(mc(w), "status.ready")));
}

/* a MaasCluster from before the annotation (name only in status): the annotation is written
 * from that name and the same record is kept, no second one */
static void check_migrated(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_string_equal(record_annotation(w), DNS_NAME);
        assert_int_equal(requests(&w->maas, "POST", "dnsresources/", NULL), 0);
        assert_string_equal(json_at_str(mc(w), "spec.controlPlaneEndpoint.host"), DNS_NAME);
        assert_true(cJSON_IsTrue(json_at(mc(w), "status.ready")));
}

/* the record's name is the annotation's, whatever the UID: the same MaasCluster with a
 * new UID (as after a move) still names the record it had */
static void check_name_from_annotation(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_string_equal(json_at_str(mc(w), "status.network.dnsName"), DNS_NAME);
        assert_string_equal(record_annotation(w), DNS_NAME);
        assert_int_equal(requests(&w->maas, "POST", "dnsresources/", NULL), 0);
        assert_int_equal(
                requests(&w->maas, "PUT", "dnsresources/5/", "ip_addresses=10.0.0.1 10.0.0.2"), 1);
}

static const struct row rows[] = {
        { .name = "adds_finalizer_first", .objects = { 0 }, .check = check_finalizer },
        { .name = "dns_name_persisted_before_record",
          .objects = { .finalizer = true, .control_planes = 1 },
          .check = check_name_first },
        { .name = "dns_name_same_after_a_stale_read",
          .objects = { .finalizer = true, .control_planes = 1 },
          .between = stale_cache,
          .check = check_same_name },
        { .name = "record_holds_control_plane_ips",
          .objects = { .finalizer = true,
                       .dns_name = DNS_NAME,
                       .control_planes = 2,
                       .worker = true },
          .arrange = no_record,
          .check = check_record_created },
        { .name = "record_updated_when_set_changes",
          .objects = { .finalizer = true, .dns_name = DNS_NAME, .control_planes = 2 },
          .arrange = record_with_one,
          .check = check_record_updated },
        { .name = "record_left_alone_when_right",
          .objects = { .finalizer = true, .dns_name = DNS_NAME, .control_planes = 1 },
          .arrange = record_with_one,
          .check = check_record_steady },
        { .name = "record_read_once_an_interval",
          .objects = { .finalizer = true, .dns_name = DNS_NAME, .control_planes = 1 },
          .arrange = record_with_one,
          .between = ten_seconds_on,
          .check = check_record_read_once },
        { .name = "record_read_again_after_the_interval",
          .objects = { .finalizer = true, .dns_name = DNS_NAME, .control_planes = 1 },
          .arrange = record_with_one,
          .between = drift_after_the_interval,
          .check = check_record_read_again },
        { .name = "user_endpoint_used_as_is",
          .objects = { .finalizer = true, .user_endpoint = true, .control_planes = 1 },
          .check = check_user_endpoint },
        { .name = "reference_record_adopted_without_status",
          .objects = { .finalizer = true, .reference_no_status = true, .control_planes = 1 },
          .arrange = record_with_one,
          .check = check_reference_record_adopted },
        { .name = "api_server_unavailable_not_ready",
          .objects = { .finalizer = true,
                       .dns_name = DNS_NAME,
                       .control_planes = 1,
                       .api_down = true },
          .arrange = record_with_one,
          .check = check_api_down },
        { .name = "delete_waits_for_machines_then_deletes_record",
          .objects = { .deleting = true, .dns_name = DNS_NAME, .control_planes = 1 },
          .arrange = record_with_one,
          .between = delete_between,
          .check = check_deleted },
        { .name = "paused_nothing_to_maas",
          .objects = { .finalizer = true,
                       .paused = true,
                       .dns_name = DNS_NAME,
                       .control_planes = 2 },
          .arrange = no_record,
          .check = check_paused },
        { .name = "delete_for_move_keeps_record",
          .objects = { .deleting = true,
                       .delete_for_move = true,
                       .record = DNS_NAME,
                       .dns_name = DNS_NAME,
                       .control_planes = 2 },
          .arrange = record_with_one,
          .check = check_kept_for_move },
        { .name = "paused_delete_waits_until_unpaused",
          .objects = { .deleting = true, .paused = true, .record = DNS_NAME, .dns_name = DNS_NAME },
          .arrange = record_with_one,
          .between = paused_delete_between,
          .check = check_deleted_after_unpause },
        { .name = "managed_by_left_alone",
          .objects = { .managed_by = true, .control_planes = 1 },
          .arrange = no_record,
          .check = check_managed_by },
        { .name = "empty_status_after_move_adopts_record",
          .objects = { .finalizer = true,
                       .record = DNS_NAME,
                       .uid = "uid-moved",
                       .endpoint = DNS_NAME,
                       .control_planes = 2,
                       .unreported = true },
          .arrange = record_with_two,
          .check = check_adopted_after_move },
        { .name = "name_in_status_migrated_to_annotation",
          .objects = { .finalizer = true, .dns_name = DNS_NAME, .control_planes = 1 },
          .arrange = record_with_one,
          .check = check_migrated },
        { .name = "record_name_from_annotation_survives_uid_change",
          .objects = { .finalizer = true,
                       .record = DNS_NAME,
                       .uid = "uid-moved",
                       .control_planes = 2 },
          .arrange = record_with_one,
          .check = check_name_from_annotation },
};

static void run_row(void **state)
{
        const struct row *r = *state;
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        unsigned passes = r->between ? 2 : 1;

        put_objects(w, &r->objects);
        if (r->arrange)
                r->arrange(w);
        for (unsigned i = 1; i <= passes; i++) {
                w->res = (struct reconcile_result){ .outcome = RECONCILE_DONE };
                w->rc = maascluster_reconcile(w->w, NS, "c1", &w->res);
                world_sync(w);
                if (i < passes)
                        r->between(w);
        }
        world_finish(w, r->check);
}

int main(void)
{
        return world_run_rows(rows, ARRAY_SIZE(rows), sizeof(rows[0]), run_row);
}
