/*
 * Unit tests for the MaasMachine reconciler: the real maasmachine_reconcile() with the real
 * maas_client and kube_client over fake transports (reconcile_world.h), on one thread and
 * a fake clock. Table-driven: each row arranges the objects and MAAS's answers, runs one or
 * more passes and checks what a user would notice: the MAAS requests made (or not made)
 * and the MaasMachine (and Node) as written.
 */
#include "../../../reconcile/maasmachine.h"
#include "reconcile_world.h"

#define MM_URL       INFRA_API "/maasmachines/m1"
#define MACHINE_URL  CAPI_API "/machines/m1"
#define CLUSTER_URL  CAPI_API "/clusters/c1"
#define BOOT_URL     CORE_API "/secrets/m1-bootstrap"
#define NODE_URL     WORKLOAD "/api/v1/nodes/node-1"
#define CLOUD_INIT   "#cloud-config\nruncmd: [echo hi]\n"
#define STARTED      "maas.infrastructure.cluster.x-k8s.io/deploy-started"
#define DEPLOY_LIMIT 1800 /* world_settings().deploy_timeout_ms in seconds */

/* --- the objects --------------------------------------------------------------------------- */

struct objects {
        bool no_infra, no_bootstrap, paused_cluster, paused_machine;
        bool finalizer, deleting, control_plane, delete_for_move;
        const char *system_id; /* spec.systemID (and providerID) already set */
        bool steady;           /* status says Deployed and ready */
        int64_t started_ago_s; /* deploy-started annotation; 0 = none */
        /* as the reference v0.8 wrote it: its LXD-host finalizer too, v1beta1 conditions */
        bool reference;
};

#define OUR_STAMP \
        "{\"capmaas-cluster\":\"c1\",\"capmaas-namespace\":\"ns1\",\"capmaas-machine\":\"m1\"}"

/* A MAAS machine as MAAS's JSON, held by owner (NULL: unowned) with owner_data (one of four
 * rotating buffers). */
static const char *node_json_as(const char *sid,
                                const char *status,
                                const char *power,
                                const char *owner,
                                const char *owner_data)
{
        static const struct {
                const char *name;
                int code;
        } codes[] = { { "Ready", 4 },      { "Deployed", 6 },           { "Deploying", 9 },
                      { "Allocated", 10 }, { "Failed deployment", 11 }, { "Broken", 8 } };

        static char bufs[4][1024];
        char who[64];
        static unsigned next;
        char *b = bufs[next++ % 4];
        int code = -1;

        for (size_t i = 0; i < ARRAY_SIZE(codes); i++)
                if (strcmp(codes[i].name, status) == 0)
                        code = codes[i].code;
        if (owner)
                (void)snprintf(who, sizeof(who), "\"%s\"", owner);
        else
                (void)snprintf(who, sizeof(who), "null");
        (void)snprintf(b, sizeof(bufs[0]),
                       "{\"system_id\":\"%s\",\"hostname\":\"node-1\",\"fqdn\":\"node-1.maas\","
                       "\"zone\":{\"name\":\"az1\"},\"pool\":{\"name\":\"default\"},"
                       "\"status\":%d,\"status_name\":\"%s\",\"power_state\":\"%s\","
                       "\"power_type\":\"ipmi\",\"cpu_count\":4,\"memory\":8192,"
                       "\"ip_addresses\":[\"10.0.0.5\"],\"tag_names\":[],\"owner\":%s,"
                       "\"owner_data\":%s}",
                       sid, code, status, power, who, owner_data);
        return b;
}

/* A machine held for m1, stamped as capmaas stamps an allocation. */
static const char *node_json(const char *sid, const char *status, const char *power)
{
        return node_json_as(sid, status, power, "capmaas", OUR_STAMP);
}

static void put_objects(struct world *w, const struct objects *o)
{
        char *b64 = base64_encode(CLOUD_INIT, strlen(CLOUD_INIT));
        char ids[256] = "", status[256] = "", annotations[256] = "", meta[1024];

        world_put(w, w->p->clusters, CLUSTER_URL,
                  world_cluster(&(struct world_cluster){ .paused = o->paused_cluster,
                                                         .not_provisioned = o->no_infra }));
        world_put(w, w->p->machines, MACHINE_URL,
                  world_machine(&(struct world_machine){
                          .name = "m1",
                          .control_plane = o->control_plane,
                          .data_secret = o->no_bootstrap ? NULL : "m1-bootstrap" }));
        world_put(w, NULL, BOOT_URL,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"m1-bootstrap\",\"namespace\":\"" NS "\"},\"data\":{\"value\":"
                            "\"%s\"}}",
                            b64));
        world_put(w, NULL, NODE_URL,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
                            "\"node-1\",\"labels\":{}},\"spec\":{}}"));
        world_put_kubeconfig(w, "c1");
        if (o->system_id)
                (void)snprintf(ids, sizeof(ids),
                               ",\"systemID\":\"%s\",\"providerID\":\"maas:///az1/%s\","
                               "\"failureDomain\":\"az1\"",
                               o->system_id, o->system_id);
        if (o->steady)
                (void)snprintf(status, sizeof(status),
                               ",\"status\":{\"ready\":true,\"machineState\":\"Deployed\","
                               "\"machinePowered\":true%s}",
                               o->reference ? ",\"conditions\":[{\"type\":\"Ready\",\"status\":"
                                              "\"True\",\"severity\":\"\","
                                              "\"lastTransitionTime\":\"2023-11-14T22:05:00Z\"}]"
                                            : "");
        (void)snprintf(annotations, sizeof(annotations), "{%s%s%s%lld%s}",
                       o->paused_machine ? "\"cluster.x-k8s.io/paused\":\"\"" : "",
                       o->paused_machine && o->started_ago_s ? "," : "",
                       o->started_ago_s ? "\"" STARTED "\":\"" : "",
                       o->started_ago_s ? (long long)(WALL_S - o->started_ago_s) : 0LL,
                       o->started_ago_s ? "\"" : "");
        if (!o->started_ago_s)
                (void)snprintf(annotations, sizeof(annotations), "{%s%s}",
                               o->paused_machine ? "\"cluster.x-k8s.io/paused\":\"\"" : "",
                               o->delete_for_move
                                       ? "\"clusterctl.cluster.x-k8s.io/delete-for-move\":\"\""
                                       : "");
        (void)snprintf(meta, sizeof(meta),
                       "\"name\":\"m1\",\"namespace\":\"" NS "\",\"uid\":\"uid-m1\","
                       "\"generation\":1,\"creationTimestamp\":\"2023-11-14T22:00:00Z\","
                       "\"labels\":{\"cluster.x-k8s.io/cluster-name\":\"c1\"%s},"
                       "\"annotations\":%s,\"finalizers\":[%s]%s,"
                       "\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\","
                       "\"kind\":\"Machine\",\"name\":\"m1\",\"uid\":\"uid-machine\"}]",
                       o->control_plane ? ",\"cluster.x-k8s.io/control-plane\":\"\"" : "",
                       annotations,
                       o->reference ? "\"" SCHEMA_FINALIZER_MACHINE
                                      "\",\"" SCHEMA_FINALIZER_HOST_EVACUATION "\""
                       : o->finalizer || o->deleting ? "\"" SCHEMA_FINALIZER_MACHINE "\""
                                                     : "",
                       o->deleting ? ",\"deletionTimestamp\":\"2023-11-14T22:13:00Z\"" : "");
        world_put(w, w->p->maasmachines, MM_URL,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasMachine\",\"metadata\":{%s},\"spec\":{\"image\":"
                            "\"ubuntu/jammy\",\"minCPU\":2,\"minMemory\":4096%s}%s}",
                            meta, ids, status));
        free(b64);
}

/* MAAS as it answers a fresh allocation of abc123 that then deploys. */
static void maas_allocates(struct world *w)
{
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[]");
        maas_route(&w->maas, "POST", "machines/?op=allocate", 200, "%s",
                   node_json("abc123", "Allocated", "off"));
        maas_route(&w->maas, "POST", "machines/abc123/?op=set_owner_data", 200, "%s",
                   node_json("abc123", "Allocated", "off"));
        maas_route(&w->maas, "PUT", "machines/abc123/", 200, "%s",
                   node_json("abc123", "Allocated", "off"));
        maas_route(&w->maas, "POST", "machines/abc123/?op=deploy", 200, "%s",
                   node_json("abc123", "Deploying", "on"));
}

/* abc123 in state, plus a replacement def456 MAAS hands out and deploys. */
static void maas_has(struct world *w, const char *state, const char *power)
{
        maas_route(&w->maas, "GET", "machines/abc123/", 200, "%s",
                   node_json("abc123", state, power));
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[%s]",
                   node_json("abc123", state, power));
        maas_route(&w->maas, "GET", "machines/?id=abc123", 200, "[%s]",
                   node_json("abc123", state, power));
        maas_route(&w->maas, "POST", "machines/abc123/?op=release", 200, "%s",
                   node_json("abc123", "Releasing", power));
        maas_route(&w->maas, "POST", "machines/?op=allocate", 200, "%s",
                   node_json("def456", "Allocated", "off"));
        maas_route(&w->maas, "POST", "machines/def456/?op=set_owner_data", 200, "%s",
                   node_json("def456", "Allocated", "off"));
        maas_route(&w->maas, "PUT", "machines/def456/", 200, "%s",
                   node_json("def456", "Allocated", "off"));
        maas_route(&w->maas, "POST", "machines/def456/?op=deploy", 200, "%s",
                   node_json("def456", "Deploying", "on"));
}

static void power_reads(struct world *w, const char *state)
{
        maas_route(&w->maas, "GET", "machines/abc123/?op=query_power_state", 200,
                   "{\"state\":\"%s\"}", state);
        maas_route(&w->maas, "POST", "machines/abc123/?op=power_on", 200, "%s",
                   node_json("abc123", "Deployed", "on"));
}

static const cJSON *mm(struct world *w)
{
        return world_get(w, MM_URL);
}

static void assert_ready(struct world *w, bool ready)
{
        assert_non_null(mm(w));
        assert_int_equal(cJSON_IsTrue(json_at(mm(w), "status.ready")), ready);
}

static void assert_deployed_reason(struct world *w, const char *reason)
{
        const char *got = condition(mm(w), SCHEMA_COND_MACHINE_DEPLOYED, "reason");

        assert_non_null(got);
        assert_string_equal(got, reason);
}

/* --- the rows ------------------------------------------------------------------------------ */

struct row {
        const char *name;
        struct objects objects;
        void (*arrange)(struct world *w);
        unsigned passes;                                 /* 0 = 1 */
        uint64_t advance_ms;                             /* fake time between passes */
        void (*between)(struct world *w, unsigned pass); /* after pass (1-based), or NULL */
        void (*check)(struct world *w);
};

/* waiting for cluster infrastructure / bootstrap data: the finalizer, a condition, no MAAS */
static void check_waits_for_infrastructure(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_true(has_finalizer(mm(w), SCHEMA_FINALIZER_MACHINE));
        assert_deployed_reason(w, SCHEMA_REASON_WAITING_FOR_CLUSTER_INFRA);
}

static void check_waits_for_bootstrap(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_deployed_reason(w, SCHEMA_REASON_WAITING_FOR_BOOTSTRAP_DATA);
}

/* a machine MAAS already has stamped with our UID is adopted, never a second allocated */
static void arrange_adopt(struct world *w)
{
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[%s]",
                   node_json("abc123", "Deployed", "on"));
}

static void check_adopt(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "op=deploy", NULL), 0);
        assert_string_equal(json_at_str(mm(w), "spec.systemID"), "abc123");
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
        assert_ready(w, true);
}

/* allocate with the constraints; providerID persisted; deploy-started stamped */
static void check_allocate(struct world *w)
{
        char started[32];

        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "machines/?op=allocate",
                                  "cpu_count=2&mem=4096&agent_name=uid-m1&comment=capmaas ns1/m1"),
                         1);
        assert_int_equal(requests(&w->maas, "POST", "abc123/?op=set_owner_data",
                                  "capmaas-cluster=c1&capmaas-namespace=ns1&capmaas-machine=m1"),
                         1);
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
        assert_string_equal(json_at_str(mm(w), "spec.failureDomain"), "az1");
        (void)snprintf(started, sizeof(started), "%d", WALL_S);
        assert_string_equal(json_find_str(mm(w), "metadata", "annotations", STARTED, NULL),
                            started);
        /* a deploy just started: back in a second */
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(w->res.after_ms, 1000);
}

/* swap is turned off (PUT swap_size=0) before the deploy is sent */
static void check_swap_off(struct world *w)
{
        long put = request_at(&w->maas, 0, "PUT", "machines/abc123/");
        long deploy = request_at(&w->maas, 0, "POST", "abc123/?op=deploy");

        assert_true(put >= 0);
        assert_string_equal(w->maas.reqs[put].body, "swap_size=0");
        assert_true(deploy > put);
}

/* deploy carries the image and the Machine's bootstrap cloud-init (base64) */
static void check_deploy_user_data(struct world *w)
{
        char *b64 = base64_encode(CLOUD_INIT, strlen(CLOUD_INIT));
        char want[256];

        (void)snprintf(want, sizeof(want),
                       "osystem=ubuntu&distro_series=jammy&user_data=%s&ephemeral_deploy=false",
                       b64);
        assert_int_equal(requests(&w->maas, "POST", "abc123/?op=deploy", want), 1);
        free(b64);
}

/* 409: no machine matches; nothing deployed, the user is told why, retried in a minute */
static void arrange_409(struct world *w)
{
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[]");
        maas_route(&w->maas, "POST", "machines/?op=allocate", 409,
                   "No available machine matches constraints: [('mem', ['4096'])]");
}

static void check_409(struct world *w)
{
        const char *msg = condition(mm(w), SCHEMA_COND_MACHINE_DEPLOYED, "message");

        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=deploy", NULL), 0);
        assert_null(json_at(mm(w), "spec.providerID"));
        assert_deployed_reason(w, SCHEMA_REASON_MACHINE_DEPLOY_FAILED);
        assert_non_null(msg);
        assert_non_null(strstr(msg, "no free MAAS machine matches minCPU=2 minMemory=4096MB"));
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(w->res.after_ms, 60000);
}

/* The list still says Allocated but an earlier pass's deploy went through (its status write
 * conflicted): MAAS answers the deploy 409, the machine reads Deploying with our stamp, and
 * that deploy is followed; nothing is released, nothing allocated again. */
static void arrange_deploy_409_deploying(struct world *w)
{
        maas_has(w, "Allocated", "off");
        maas_route(&w->maas, "GET", "machines/abc123/", 200, "%s",
                   node_json("abc123", "Deploying", "on"));
        maas_route(&w->maas, "PUT", "machines/abc123/", 200, "%s",
                   node_json("abc123", "Deploying", "on"));
        maas_route(&w->maas, "POST", "machines/abc123/?op=deploy", 409,
                   "Node cannot be deployed because it is in the Deploying state.");
        /* the pass's first read is the stale one */
        maas_route(&w->maas, "GET", "machines/abc123/", 200, "%s",
                   node_json("abc123", "Allocated", "off"))
                ->times = 1;
}

static void check_deploy_409_deploying(struct world *w)
{
        long deploy = request_at(&w->maas, 0, "POST", "abc123/?op=deploy");

        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=deploy", NULL), 1);
        assert_true(deploy >= 0);
        assert_true(request_at(&w->maas, (size_t)deploy, "GET", "machines/abc123/") > deploy);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 0);
}

/* The same 409 on a machine deploying for someone else is a refusal: released, as before. */
static void arrange_deploy_409_other(struct world *w)
{
        maas_has(w, "Allocated", "off");
        maas_route(&w->maas, "PUT", "machines/abc123/", 200, "%s",
                   node_json("abc123", "Deploying", "on"));
        maas_route(&w->maas, "POST", "machines/abc123/?op=deploy", 409,
                   "Node cannot be deployed because it is in the Deploying state.");
        maas_route(&w->maas, "GET", "machines/abc123/", 200, "%s",
                   node_json_as("abc123", "Deploying", "on", "admin",
                                "{\"capmaas-cluster\":\"c9\",\"capmaas-namespace\":"
                                "\"ns9\",\"capmaas-machine\":\"m9\"}"));
        maas_route(&w->maas, "GET", "machines/abc123/", 200, "%s",
                   node_json("abc123", "Allocated", "off"))
                ->times = 1;
}

static void check_deploy_409_other(struct world *w)
{
        assert_int_equal(requests(&w->maas, "POST", "op=deploy", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 1);
}

/* MAAS refuses every deploy (a kernel it lacks): released, and no machine is allocated again
 * before the backoff (5 s, then 10 s), however many passes come in between */
#define DEPLOY_RETRY "maas.infrastructure.cluster.x-k8s.io/deploy-retry"

static void arrange_deploy_refused(struct world *w)
{
        maas_allocates(w);
        maas_route(&w->maas, "POST", "machines/abc123/?op=deploy", 400,
                   "{\"hwe_kernel\": [\"hwe-99.04 is not available for ubuntu/jammy.\"]}");
        maas_route(&w->maas, "POST", "machines/abc123/?op=release", 200, "%s",
                   node_json("abc123", "Releasing", "off"));
}

static void assert_deploy_backoff(struct world *w, unsigned tries, unsigned next_s)
{
        const char *msg = condition(mm(w), SCHEMA_COND_MACHINE_DEPLOYED, "message");
        const char *ann = json_find_str(mm(w), "metadata", "annotations", DEPLOY_RETRY, NULL);
        char want[64];

        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), tries);
        assert_int_equal(requests(&w->maas, "POST", "op=deploy", NULL), tries);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), tries);
        assert_null(json_at(mm(w), "spec.providerID"));
        assert_deployed_reason(w, SCHEMA_REASON_MACHINE_DEPLOY_FAILED);
        assert_non_null(msg);
        assert_non_null(strstr(msg, "hwe-99.04 is not available for ubuntu/jammy"));
        (void)snprintf(want, sizeof(want), "next try in %u s", next_s);
        assert_non_null(strstr(msg, want));
        assert_non_null(ann);
        assert_int_equal(strtoul(ann, NULL, 10), tries);
}

/* two more passes 2 s apart (the status writes' own events): no MAAS call, a requeue for the
 * end of the backoff */
static void check_deploy_refused_waits(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_deploy_backoff(w, 1, 5);
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_true(w->res.after_ms > 0 && w->res.after_ms <= 1000);
}

static void check_deploy_refused_again(struct world *w)
{
        assert_deploy_backoff(w, 2, 10);
}

/* deployed after a refusal: the backoff goes */
static void deploy_refused_between(struct world *w, unsigned pass)
{
        (void)pass;
        maas_route(&w->maas, "POST", "machines/abc123/?op=deploy", 200, "%s",
                   node_json("abc123", "Deploying", "on"));
}

static void check_deploy_after_refusal(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 2);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 1);
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
        assert_null(cJSON_GetObjectItemCaseSensitive(json_at(mm(w), "metadata.annotations"),
                                                     DEPLOY_RETRY));
}

/* 503 + Retry-After: MAAS did not act; the allocate is sent again after the wait it asked */
static void arrange_503(struct world *w)
{
        maas_allocates(w);
        maas_route(&w->maas, "POST", "machines/?op=allocate", 503, "busy")->retry_after_s = 7;
        w->maas.routes[w->maas.n_routes - 1].times = 1;
}

static void check_503(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 2);
        assert_int_equal(w->n_sleeps, 1);
        assert_int_equal(w->slept_ms[0], 7000);
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
}

/* MAAS refuses the key: the shared list of MaasMachines without a machine is refused, and
 * the pass stops there rather than asking MAAS again by its own UID (one 401 a pass) */
static void arrange_refused(struct world *w)
{
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 401, "Invalid access token");
}

static void check_refused_once(struct world *w)
{
        assert_int_equal(w->rc, CM_EUNAUTHORIZED);
        assert_int_equal(w->maas.n_reqs, 1);
        assert_null(json_at(mm(w), "spec.providerID"));
}

/* a timed-out allocate is never repeated: the next pass finds the machine by its stamp */
static void arrange_timeout(struct world *w)
{
        maas_allocates(w);
        maas_route(&w->maas, "POST", "machines/?op=allocate", 0, "")->fail = CM_ETIMEDOUT;
}

static void timeout_between(struct world *w, unsigned pass)
{
        assert_int_equal(w->rc, CM_ETIMEDOUT);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 1);
        assert_null(json_at(mm(w), "spec.providerID"));
        (void)pass;
        /* MAAS did allocate it: the list by agent_name now shows it */
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[%s]",
                   node_json("abc123", "Allocated", "off"));
}

static void check_timeout(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "abc123/?op=deploy", NULL), 1);
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
}

/* Deploying -> Deployed */
static void arrange_deploying(struct world *w)
{
        maas_has(w, "Deploying", "on");
}

static void deploying_between(struct world *w, unsigned pass)
{
        (void)pass;
        assert_int_equal(w->rc, 0);
        assert_ready(w, false);
        assert_deployed_reason(w, SCHEMA_REASON_MACHINE_DEPLOYING);
        /* just after the in-flight list falls due: an eighth of 60 s, capped at 5 s */
        assert_int_equal(w->res.after_ms, 5000);
        assert_int_equal(requests(&w->maas, "GET", "machines/abc123/", NULL), 0);
        maas_route(&w->maas, "GET", "machines/?id=abc123", 200, "[%s]",
                   node_json("abc123", "Deployed", "on"));
}

static void check_deployed(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_ready(w, true);
        assert_deployed_reason(w, SCHEMA_REASON_MACHINE_DEPLOYED);
        assert_string_equal(json_at_str(mm(w), "status.machineState"), "Deployed");
        assert_true(cJSON_IsTrue(json_at(mm(w), "status.machinePowered")));
        assert_int_equal(requests(&w->maas, "POST", "op=", NULL), 0); /* nothing done to it */
        /* the in-flight list answered both passes: no GET of the machine */
        assert_int_equal(requests(&w->maas, "GET", "machines/abc123/", NULL), 0);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=abc123", NULL), 2);
}

/* a machine in flight that the list lacks: one GET confirms it is gone (404), and before
 * provisioning another is allocated (once the list of MaasMachines without a machine says
 * none is stamped for it) */
static void arrange_deploying_gone(struct world *w)
{
        maas_allocates(w);
        maas_route(&w->maas, "GET", "machines/?id=abc123", 200, "[]");
}

static void check_gone_confirmed_by_get(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=abc123", NULL), 1);
        assert_int_equal(requests(&w->maas, "GET", "machines/abc123/", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 1);
}

/* a failed deploy, and one past the watchdog: replaced (new one allocated and deployed,
 * old one released) */
static void arrange_failed(struct world *w)
{
        maas_has(w, "Failed deployment", "off");
}

static void check_replaced(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "machines/abc123/?op=release", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "def456/?op=deploy", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "abc123/?op=deploy", NULL), 0);
        assert_string_equal(json_at_str(mm(w), "spec.systemID"), "def456");
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/def456");
}

static void check_not_replaced(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 1); /* the GET, nothing else */
        assert_string_equal(json_at_str(mm(w), "spec.systemID"), "abc123");
        assert_deployed_reason(w, SCHEMA_REASON_MACHINE_DEPLOYING);
}

/* power: Deployed but off twice in a row -> one power-on; unknown never powers on */
static void arrange_off(struct world *w)
{
        maas_has(w, "Deployed", "off");
        power_reads(w, "off");
}

static void off_between(struct world *w, unsigned pass)
{
        (void)pass;
        assert_int_equal(w->rc, 0);
        /* one reading is not enough */
        assert_int_equal(requests(&w->maas, "POST", "op=power_on", NULL), 0);
        assert_deployed_reason(w, SCHEMA_REASON_MACHINE_POWERED_OFF);
        assert_int_equal(w->res.after_ms, 3000);
}

static void check_powered_on(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "GET", "op=query_power_state", NULL), 2);
        assert_int_equal(requests(&w->maas, "POST", "machines/abc123/?op=power_on", NULL), 1);
}

static void arrange_unknown(struct world *w)
{
        maas_has(w, "Deployed", "unknown");
        power_reads(w, "unknown");
}

static void arrange_power_error(struct world *w)
{
        maas_has(w, "Deployed", "error");
        power_reads(w, "error");
}

static void check_never_powered_on(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "GET", "op=query_power_state", NULL), 3);
        assert_int_equal(requests(&w->maas, "POST", "op=power_on", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "op=power_off", NULL), 0);
        assert_int_equal(w->res.after_ms, 60000);
        assert_ready(w, false);
}

/* providerID maas:///<zone>/<system_id> on the MaasMachine and the workload Node;
 * status.addresses from MAAS */
static void arrange_deployed(struct world *w)
{
        maas_has(w, "Deployed", "on");
}

static void check_provider_id(struct world *w)
{
        const cJSON *a = json_at(mm(w), "status.addresses");
        const cJSON *node = world_get(w, NODE_URL);

        assert_int_equal(w->rc, 0);
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
        /* as the reference writes them: the FQDN twice, then each IP twice */
        assert_int_equal(cJSON_GetArraySize(a), 4);
        assert_string_equal(json_at_str(a, "0.type"), "ExternalDNS");
        assert_string_equal(json_at_str(a, "0.address"), "node-1.maas");
        assert_string_equal(json_at_str(a, "1.type"), "InternalDNS");
        assert_string_equal(json_at_str(a, "1.address"), "node-1.maas");
        assert_string_equal(json_at_str(a, "2.type"), "ExternalIP");
        assert_string_equal(json_at_str(a, "2.address"), "10.0.0.5");
        assert_string_equal(json_at_str(a, "3.type"), "InternalIP");
        assert_string_equal(json_at_str(a, "3.address"), "10.0.0.5");
        assert_string_equal(json_at_str(mm(w), "status.failureDomain"), "az1");
        assert_string_equal(condition(mm(w), SCHEMA_COND_PAUSED, "status"), SCHEMA_CONDITION_FALSE);
        assert_string_equal(condition(mm(w), SCHEMA_COND_PAUSED, "reason"),
                            SCHEMA_REASON_NOT_PAUSED);
        assert_string_equal(json_at_str(node, "spec.providerID"), "maas:///az1/abc123");
        assert_string_equal(
                json_find_str(node, "metadata", "labels", "topology.kubernetes.io/zone", NULL),
                "az1");
        assert_int_equal(requests(&w->kube, "PATCH", NODE_URL, NULL), 1);
        assert_int_equal(w->res.after_ms, 60000); /* --machine-refresh */
}

/* delete: release (with erase), then the finalizer goes; MAAS 404s are fine */
/* a delete pass on a stale copy (finalizer still there) after our release: nothing read or
 * released again, the finalizer goes */
static void stale_delete_between(struct world *w, unsigned pass)
{
        (void)pass;
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 1);
        assert_null(mm(w));
        put_objects(w,
                    &(struct objects){ .deleting = true, .system_id = "abc123", .steady = true });
}

static void check_released_once(struct world *w)
{
        assert_int_equal(w->rc, 0);
        /* the deleting list answered the first pass, nothing the second */
        assert_int_equal(requests(&w->maas, "GET", "machines/abc123/", NULL), 0);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=abc123", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 1);
        assert_null(mm(w));
}

static void check_released(struct world *w)
{
        long release = request_at(&w->maas, 0, "POST", "machines/abc123/?op=release");
        long last_patch = -1;

        assert_int_equal(w->rc, 0);
        assert_true(release >= 0);
        assert_non_null(strstr(w->maas.reqs[release].body, "erase=true"));
        assert_null(mm(w)); /* finalizer removed: the API server deleted it */
        for (size_t i = 0; i < w->kube.n_reqs; i++)
                if (strcmp(w->kube.reqs[i].method, "PATCH") == 0)
                        last_patch = (long)i;
        assert_non_null(strstr(w->kube.reqs[last_patch].body, "\"finalizers\""));
}

static void arrange_release_404(struct world *w)
{
        maas_has(w, "Deployed", "on");
        maas_route(&w->maas, "POST", "machines/abc123/?op=release", 404, "Not Found");
}

static void check_gone_after_404(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 1);
        assert_null(mm(w));
}

static void arrange_machine_gone(struct world *w)
{
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[]");
}

static void check_gone_without_release(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "GET", "machines/abc123/", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 0);
        assert_null(mm(w));
}

/* the reference's object: its status is migrated first (one PATCH on /status, before
 * anything else is written), and its LXD-host finalizer goes with ours */
static void check_reference_released(struct world *w)
{
        size_t i = 0;

        check_released(w);
        while (i < w->kube.n_reqs && strcmp(w->kube.reqs[i].method, "PATCH") != 0)
                i++;
        assert_true(i < w->kube.n_reqs);
        assert_non_null(strstr(w->kube.reqs[i].path, MM_URL "/status?"));
        assert_non_null(strstr(w->kube.reqs[i].body, SCHEMA_REASON_NO_REASON_REPORTED));
        assert_null(strstr(w->kube.reqs[i].body, "severity"));
}

static void check_kept_for_move(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_null(mm(w));
}

/* paused as clusterctl move leaves it: nothing asked of MAAS, the finalizer is clusterctl's
 * to remove */
static void check_kept_for_move_paused(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_true(has_finalizer(mm(w), SCHEMA_FINALIZER_MACHINE));
}

/* pause: nothing read from or written to MAAS; the MaasMachine says Paused (one status
 * write, and none by the second pass) and is otherwise untouched */
static void check_paused(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_int_equal(writes(&w->kube), 1);
        assert_int_equal(requests(&w->kube, "PATCH", MM_URL "/status", NULL), 1);
        assert_string_equal(condition(mm(w), SCHEMA_COND_PAUSED, "status"), SCHEMA_CONDITION_TRUE);
        assert_string_equal(condition(mm(w), SCHEMA_COND_PAUSED, "reason"), SCHEMA_REASON_PAUSED);
        assert_null(json_at(mm(w), "status.machineState"));
}

/* a paused delete (clusterctl move pauses first) releases nothing and keeps the finalizer;
 * unpaused, the delete goes on */
static void paused_delete_between(struct world *w, unsigned pass)
{
        (void)pass;
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, 0);
        assert_non_null(mm(w));
        assert_true(has_finalizer(mm(w), SCHEMA_FINALIZER_MACHINE));
        assert_string_equal(condition(mm(w), SCHEMA_COND_PAUSED, "status"), SCHEMA_CONDITION_TRUE);
        world_put(w, w->p->clusters, CLUSTER_URL, world_cluster(&(struct world_cluster){ 0 }));
}

static void check_released_after_unpause(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "machines/abc123/?op=release", NULL), 1);
        assert_null(mm(w));
}

/* after clusterctl move: the MaasMachine comes with spec (systemID, providerID) and the
 * finalizer but no status, and the MAAS machine is stamped with the source's UID. It is
 * found by its system ID: no allocate, deploy or release; status is rebuilt from MAAS */
static void check_adopted_after_move(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "GET", "machines/abc123/", NULL), 1);
        assert_int_equal(writes(&w->maas), 0);
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
        assert_ready(w, true);
        assert_string_equal(json_at_str(mm(w), "status.machineState"), "Deployed");
        assert_string_equal(json_at_str(mm(w), "status.addresses.2.address"), "10.0.0.5");
        assert_string_equal(json_at_str(mm(w), "status.failureDomain"), "az1");
}

/* --- a provisioned MaasMachine whose host is lost (issue 25) -------------------------------- */

/* What MAAS answers for abc123 (GET, the fleet list by id, the agent_name check), and the
 * replacement it would hand out if asked. */
static void maas_has_as(struct world *w, const char *state, const char *owner, const char *od)
{
        maas_has(w, "Deployed", "on"); /* replacement routes; abc123 overridden below */
        maas_route(&w->maas, "GET", "machines/abc123/", 200, "%s",
                   node_json_as("abc123", state, "off", owner, od));
        maas_route(&w->maas, "GET", "machines/?id=abc123", 200, "[%s]",
                   node_json_as("abc123", state, "off", owner, od));
        maas_route(&w->maas, "GET", "machines/?id=abc123&agent_name=uid-m1", 200, "[]");
}

static void arrange_released(struct world *w)
{
        maas_has_as(w, "Ready", NULL, "{}");
}

static void arrange_recommissioning(struct world *w)
{
        maas_has_as(w, "Commissioning", NULL, "{}");
}

static void arrange_other_owner(struct world *w)
{
        maas_has_as(w, "Allocated", "user2", "{}");
}

static void arrange_other_capmaas_machine(struct world *w)
{
        maas_has_as(w, "Deployed", "capmaas",
                    "{\"capmaas-namespace\":\"ns1\",\"capmaas-machine\":\"m7\"}");
}

static void arrange_broken(struct world *w)
{
        maas_has_as(w, "Broken", "capmaas", OUR_STAMP);
}

static void arrange_deleted(struct world *w)
{
        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[]");
        maas_route(&w->maas, "GET", "machines/?id=abc123", 200, "[]");
        maas_route(&w->maas, "GET", "machines/abc123/", 404, "Not Found");
        maas_route(&w->maas, "POST", "machines/?op=allocate", 200, "%s",
                   node_json("def456", "Allocated", "off"));
}

static size_t reqs_after_first_pass;

/* terminal: no MAAS write, the ids kept, Ready False, failureReason as the reference sets it;
 * a second pass does not even read MAAS */
static void lost_between(struct world *w, unsigned pass)
{
        const char *msg = condition(mm(w), SCHEMA_COND_MACHINE_DEPLOYED, "message");

        (void)pass;
        assert_int_equal(w->rc, 0);
        assert_int_equal(writes(&w->maas), 0);
        assert_string_equal(json_at_str(mm(w), "spec.systemID"), "abc123");
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
        assert_ready(w, false);
        assert_true(cJSON_IsTrue(json_at(mm(w), "status.initialization.provisioned")));
        assert_deployed_reason(w, SCHEMA_REASON_MACHINE_TERMINATED);
        assert_string_equal(condition(mm(w), SCHEMA_COND_READY, "status"), "False");
        assert_string_equal(condition(mm(w), SCHEMA_COND_READY, "reason"),
                            SCHEMA_REASON_MACHINE_TERMINATED);
        assert_non_null(msg);
        assert_non_null(strstr(msg, "MAAS machine abc123 ("));
        assert_string_equal(json_at_str(mm(w), "status.failureReason"), "UpdateError");
        assert_non_null(strstr(json_at_str(mm(w), "status.failureMessage"), "abc123"));
        assert_int_equal(w->res.outcome, RECONCILE_DONE);
        reqs_after_first_pass = w->maas.n_reqs;
}

static void check_lost_stays_terminal(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(w->maas.n_reqs, reqs_after_first_pass); /* nothing asked of MAAS */
        assert_string_equal(json_at_str(mm(w), "spec.providerID"), "maas:///az1/abc123");
        assert_string_equal(json_at_str(mm(w), "status.failureReason"), "UpdateError");
        assert_deployed_reason(w, SCHEMA_REASON_MACHINE_TERMINATED);
}

static void check_lost_released_says_so(struct world *w)
{
        check_lost_stays_terminal(w);
        assert_non_null(strstr(json_at_str(mm(w), "status.failureMessage"),
                               "is Ready in MAAS with no owner (released)"));
}

static void check_lost_other_owner_says_so(struct world *w)
{
        check_lost_stays_terminal(w);
        assert_non_null(
                strstr(json_at_str(mm(w), "status.failureMessage"), "is Allocated to user2"));
}

static void check_lost_deleted_says_so(struct world *w)
{
        check_lost_stays_terminal(w);
        assert_non_null(
                strstr(json_at_str(mm(w), "status.failureMessage"), "no longer exists in MAAS"));
}

/* before provisioning a released host is still given up and another allocated */
static void check_released_before_provisioning(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_null(json_at(mm(w), "status.failureReason"));
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "op=deploy", NULL), 0);
        assert_null(json_at(mm(w), "spec.systemID"));
        assert_null(json_at(mm(w), "spec.providerID"));
}

/* a host held by someone else is never deployed, even before provisioning */
static void check_other_owner_before_provisioning(struct world *w)
{
        check_released_before_provisioning(w);
        assert_int_equal(requests(&w->maas, "PUT", "machines/abc123/", NULL), 0);
}

/* a machine allocated before capmaas took over (no stamp, no deploy-started) stays ours */
static void arrange_unstamped(struct world *w)
{
        maas_has_as(w, "Deployed", "capmaas", "{}");
        maas_route(&w->maas, "GET", "machines/abc123/", 200, "%s",
                   node_json_as("abc123", "Deployed", "on", "capmaas", "{}"));
        maas_route(&w->maas, "GET", "machines/?id=abc123", 200, "[%s]",
                   node_json_as("abc123", "Deployed", "on", "capmaas", "{}"));
}

static void check_unstamped_kept(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_ready(w, true);
        assert_null(json_at(mm(w), "status.failureReason"));
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=abc123&agent_name=uid-m1", NULL),
                         1);
}

/* capmaas's own machine whose owner data write failed: the agent_name stamp says it is
 * ours, and the owner data is written again */
static void arrange_owner_data_lost(struct world *w)
{
        arrange_unstamped(w);
        maas_route(&w->maas, "GET", "machines/?id=abc123&agent_name=uid-m1", 200, "[%s]",
                   node_json_as("abc123", "Deployed", "on", "capmaas", "{}"));
        maas_route(&w->maas, "POST", "machines/abc123/?op=set_owner_data", 200, "%s",
                   node_json("abc123", "Deployed", "on"));
}

static void check_owner_data_restamped(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_ready(w, true);
        assert_null(json_at(mm(w), "status.failureReason"));
        assert_int_equal(requests(&w->maas, "POST", "abc123/?op=set_owner_data",
                                  "capmaas-cluster=c1&capmaas-namespace=ns1&capmaas-machine=m1"),
                         1);
}

/* deleting: a host held by someone else is left alone, the finalizer still goes */
static void check_delete_leaves_other_owner(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 0);
        assert_null(mm(w));
}

static const struct row rows[] = {
        { .name = "waits_for_cluster_infrastructure",
          .objects = { .no_infra = true },
          .check = check_waits_for_infrastructure },
        { .name = "waits_for_bootstrap_data",
          .objects = { .no_bootstrap = true, .finalizer = true },
          .check = check_waits_for_bootstrap },
        { .name = "adopts_machine_stamped_with_uid",
          .objects = { .finalizer = true },
          .arrange = arrange_adopt,
          .check = check_adopt },
        { .name = "allocate_persists_provider_id",
          .objects = { .finalizer = true },
          .arrange = maas_allocates,
          .check = check_allocate },
        { .name = "allocate_409_no_machine_available",
          .objects = { .finalizer = true },
          .arrange = arrange_409,
          .check = check_409 },
        { .name = "deploy_409_already_deploying_is_followed",
          .objects = { .finalizer = true, .system_id = "abc123" },
          .arrange = arrange_deploy_409_deploying,
          .check = check_deploy_409_deploying },
        { .name = "deploy_409_deploying_for_another_is_released",
          .objects = { .finalizer = true, .system_id = "abc123" },
          .arrange = arrange_deploy_409_other,
          .check = check_deploy_409_other },
        { .name = "deploy_refused_backs_off",
          .objects = { .finalizer = true },
          .arrange = arrange_deploy_refused,
          .passes = 3,
          .advance_ms = 2000,
          .check = check_deploy_refused_waits },
        { .name = "deploy_refused_tried_again_after_backoff",
          .objects = { .finalizer = true },
          .arrange = arrange_deploy_refused,
          .passes = 2,
          .advance_ms = 5000,
          .check = check_deploy_refused_again },
        { .name = "deploy_after_refusal_clears_backoff",
          .objects = { .finalizer = true },
          .arrange = arrange_deploy_refused,
          .passes = 2,
          .advance_ms = 5000,
          .between = deploy_refused_between,
          .check = check_deploy_after_refusal },
        { .name = "allocate_503_retry_after",
          .objects = { .finalizer = true },
          .arrange = arrange_503,
          .check = check_503 },
        { .name = "refused_key_costs_one_request",
          .objects = { .finalizer = true },
          .arrange = arrange_refused,
          .check = check_refused_once },
        { .name = "allocate_timeout_never_repeated",
          .objects = { .finalizer = true },
          .arrange = arrange_timeout,
          .passes = 2,
          .between = timeout_between,
          .check = check_timeout },
        { .name = "swap_off_before_deploy",
          .objects = { .finalizer = true },
          .arrange = maas_allocates,
          .check = check_swap_off },
        { .name = "deploy_with_bootstrap_cloud_init",
          .objects = { .finalizer = true },
          .arrange = maas_allocates,
          .check = check_deploy_user_data },
        { .name = "deploying_to_deployed",
          .objects = { .finalizer = true, .system_id = "abc123", .started_ago_s = 60 },
          .arrange = arrange_deploying,
          .passes = 2,
          .advance_ms = 5000,
          .between = deploying_between,
          .check = check_deployed },
        { .name = "deploying_machine_missing_from_list_confirmed_by_get",
          .objects = { .finalizer = true, .system_id = "abc123", .started_ago_s = 60 },
          .arrange = arrange_deploying_gone,
          .passes = 2,
          .advance_ms = 2000,
          .check = check_gone_confirmed_by_get },
        { .name = "failed_deployment_replaced",
          .objects = { .finalizer = true, .system_id = "abc123", .started_ago_s = 60 },
          .arrange = arrange_failed,
          .check = check_replaced },
        { .name = "deploy_timeout_replaced",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .started_ago_s = DEPLOY_LIMIT + 1 },
          .arrange = arrange_deploying,
          .check = check_replaced },
        { .name = "deploying_within_timeout_kept",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .started_ago_s = DEPLOY_LIMIT - 1 },
          .arrange = arrange_deploying,
          .check = check_not_replaced },
        { .name = "deployed_but_off_powered_on",
          .objects = { .finalizer = true, .system_id = "abc123" },
          .arrange = arrange_off,
          .passes = 2,
          .advance_ms = 3000,
          .between = off_between,
          .check = check_powered_on },
        { .name = "power_unknown_never_powers_on",
          .objects = { .finalizer = true, .system_id = "abc123" },
          .arrange = arrange_unknown,
          .passes = 3,
          .advance_ms = 60000,
          .check = check_never_powered_on },
        { .name = "power_error_never_powers_on",
          .objects = { .finalizer = true, .system_id = "abc123" },
          .arrange = arrange_power_error,
          .passes = 3,
          .advance_ms = 60000,
          .check = check_never_powered_on },
        { .name = "provider_id_and_addresses",
          .objects = { .finalizer = true, .system_id = "abc123" },
          .arrange = arrange_deployed,
          .check = check_provider_id },
        { .name = "delete_releases_then_removes_finalizer",
          .objects = { .deleting = true, .system_id = "abc123", .steady = true },
          .arrange = arrange_deployed,
          .check = check_released },
        { .name = "delete_pass_after_our_release_reads_nothing",
          .objects = { .deleting = true, .system_id = "abc123", .steady = true },
          .arrange = arrange_deployed,
          .passes = 2,
          .between = stale_delete_between,
          .check = check_released_once },
        { .name = "delete_release_404_is_fine",
          .objects = { .deleting = true, .system_id = "abc123" },
          .arrange = arrange_release_404,
          .check = check_gone_after_404 },
        { .name = "delete_machine_gone_from_maas",
          .objects = { .deleting = true, .system_id = "abc123" },
          .arrange = arrange_machine_gone,
          .check = check_gone_without_release },
        { .name = "delete_of_reference_machine_migrates_and_drops_its_finalizers",
          .objects = { .deleting = true, .system_id = "abc123", .steady = true, .reference = true },
          .arrange = arrange_deployed,
          .check = check_reference_released },
        { .name = "delete_for_move_keeps_machine",
          .objects = { .deleting = true, .system_id = "abc123", .delete_for_move = true },
          .arrange = arrange_deployed,
          .check = check_kept_for_move },
        { .name = "lost_released_is_terminal",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .steady = true,
                       .started_ago_s = 600 },
          .arrange = arrange_released,
          .passes = 2,
          .between = lost_between,
          .check = check_lost_released_says_so },
        { .name = "lost_recommissioning_is_terminal",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .steady = true,
                       .started_ago_s = 600 },
          .arrange = arrange_recommissioning,
          .passes = 2,
          .between = lost_between,
          .check = check_lost_stays_terminal },
        { .name = "lost_to_another_user_is_terminal",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .steady = true,
                       .started_ago_s = 600 },
          .arrange = arrange_other_owner,
          .passes = 2,
          .between = lost_between,
          .check = check_lost_other_owner_says_so },
        { .name = "lost_to_another_maasmachine_is_terminal",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .steady = true,
                       .started_ago_s = 600 },
          .arrange = arrange_other_capmaas_machine,
          .passes = 2,
          .between = lost_between,
          .check = check_lost_stays_terminal },
        { .name = "lost_broken_is_terminal",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .steady = true,
                       .started_ago_s = 600 },
          .arrange = arrange_broken,
          .passes = 2,
          .between = lost_between,
          .check = check_lost_stays_terminal },
        { .name = "lost_deleted_from_maas_is_terminal",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .steady = true,
                       .started_ago_s = 600 },
          .arrange = arrange_deleted,
          .passes = 2,
          .between = lost_between,
          .check = check_lost_deleted_says_so },
        { .name = "released_before_provisioning_allocates_anew",
          .objects = { .finalizer = true, .system_id = "abc123", .started_ago_s = 60 },
          .arrange = arrange_released,
          .check = check_released_before_provisioning },
        { .name = "other_owner_before_provisioning_never_deployed",
          .objects = { .finalizer = true, .system_id = "abc123", .started_ago_s = 60 },
          .arrange = arrange_other_owner,
          .check = check_other_owner_before_provisioning },
        { .name = "unstamped_machine_from_before_capmaas_kept",
          .objects = { .finalizer = true, .system_id = "abc123", .steady = true },
          .arrange = arrange_unstamped,
          .check = check_unstamped_kept },
        { .name = "owner_data_lost_is_written_again",
          .objects = { .finalizer = true,
                       .system_id = "abc123",
                       .steady = true,
                       .started_ago_s = 600 },
          .arrange = arrange_owner_data_lost,
          .check = check_owner_data_restamped },
        { .name = "delete_leaves_a_host_held_by_another_user",
          .objects = { .deleting = true, .system_id = "abc123", .started_ago_s = 600 },
          .arrange = arrange_other_owner,
          .check = check_delete_leaves_other_owner },
        { .name = "paused_cluster_nothing_written",
          .objects = { .paused_cluster = true, .system_id = "abc123" },
          .arrange = arrange_off,
          .passes = 2,
          .check = check_paused },
        { .name = "paused_maasmachine_nothing_written",
          .objects = { .paused_machine = true, .finalizer = true },
          .arrange = maas_allocates,
          .passes = 2,
          .check = check_paused },
        { .name = "paused_delete_releases_nothing_until_unpaused",
          .objects = { .deleting = true,
                       .paused_cluster = true,
                       .system_id = "abc123",
                       .steady = true },
          .arrange = arrange_deployed,
          .passes = 2,
          .between = paused_delete_between,
          .check = check_released_after_unpause },
        { .name = "paused_delete_for_move_releases_nothing",
          .objects = { .deleting = true,
                       .paused_cluster = true,
                       .delete_for_move = true,
                       .system_id = "abc123" },
          .arrange = arrange_deployed,
          .check = check_kept_for_move_paused },
        { .name = "empty_status_after_move_adopts_by_system_id",
          .objects = { .finalizer = true, .system_id = "abc123" },
          .arrange = arrange_deployed,
          .check = check_adopted_after_move },
};

static void run_row(void **state)
{
        const struct row *r = *state;
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);
        unsigned passes = r->passes ? r->passes : 1;

        put_objects(w, &r->objects);
        if (r->arrange)
                r->arrange(w);
        for (unsigned i = 1; i <= passes; i++) {
                w->res = (struct reconcile_result){ .outcome = RECONCILE_DONE };
                w->rc = maasmachine_reconcile(w->w, NS, "m1", &w->res);
                world_sync(w);
                if (i < passes && r->between)
                        r->between(w, i);
                clock_fake_advance(&w->clock, r->advance_ms);
        }
        world_finish(w, r->check);
}

/* --- a rollout: many machines in flight ride one list per interval ------------------------- */

#define FLEET_N 5

/* MaasMachine and Machine m<i> of cluster c1, deploying MAAS machine s<i> since ago_s. */
static void put_deploying(struct world *w, unsigned i, int64_t ago_s)
{
        char name[16], url[256], murl[256];

        (void)snprintf(name, sizeof(name), "m%u", i);
        (void)snprintf(url, sizeof(url), INFRA_API "/maasmachines/%s", name);
        (void)snprintf(murl, sizeof(murl), CAPI_API "/machines/%s", name);
        world_put(w, w->p->machines, murl,
                  world_machine(
                          &(struct world_machine){ .name = name, .data_secret = "m1-bootstrap" }));
        world_put(w, w->p->maasmachines, url,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"%s\","
                            "\"namespace\":\"" NS "\",\"uid\":\"uid-%s\",\"generation\":1,"
                            "\"labels\":{\"cluster.x-k8s.io/cluster-name\":\"c1\"},"
                            "\"annotations\":{\"" STARTED "\":\"%lld\"},"
                            "\"finalizers\":[\"" SCHEMA_FINALIZER_MACHINE "\"],"
                            "\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"Machine\",\"name\":\"%s\",\"uid\":\"uid-machine\"}]},"
                            "\"spec\":{\"image\":\"ubuntu/jammy\",\"systemID\":\"s%u\","
                            "\"providerID\":\"maas:///az1/s%u\"}}",
                            name, name, (long long)(WALL_S - ago_s), name, i, i));
}

/* What the in-flight list of s1..s<n> answers: each in state, stamped for its m<i>. */
static void route_fleet(struct world *w, unsigned n, const char *state)
{
        char ids[256] = "machines/?", body[8000] = "[";
        size_t k = strlen(ids), b = 1;

        for (unsigned i = 1; i <= n; i++) {
                char sid[16], od[160];

                (void)snprintf(sid, sizeof(sid), "s%u", i);
                (void)snprintf(od, sizeof(od),
                               "{\"capmaas-cluster\":\"c1\",\"capmaas-namespace\":\"ns1\","
                               "\"capmaas-machine\":\"m%u\"}",
                               i);
                k += (size_t)snprintf(ids + k, sizeof(ids) - k, "%sid=%s", i > 1 ? "&" : "", sid);
                b += (size_t)snprintf(body + b, sizeof(body) - b, "%s%s", i > 1 ? "," : "",
                                      node_json_as(sid, state, "on", "capmaas", od));
        }
        (void)snprintf(body + b, sizeof(body) - b, "]");
        maas_route(&w->maas, "GET", ids, 200, "%s", body);
}

/* Runs one pass of m<first>..m<last>, each asserting rc 0; the last result stays in w->res. */
static void passes_of(struct world *w, unsigned first, unsigned last)
{
        for (unsigned i = first; i <= last; i++) {
                char name[16];

                (void)snprintf(name, sizeof(name), "m%u", i);
                w->res = (struct reconcile_result){ .outcome = RECONCILE_DONE };
                w->rc = maasmachine_reconcile(w->w, NS, name, &w->res);
                assert_int_equal(w->rc, 0);
                world_sync(w);
        }
}

static size_t machine_gets(const struct fake_http *f)
{
        size_t n = 0;

        for (size_t i = 0; i < f->n_reqs; i++)
                if (strcmp(f->reqs[i].method, "GET") == 0 &&
                    strncmp(f->reqs[i].path, "machines/s", 10) == 0)
                        n++;
        return n;
}

static void test_rollout_rides_one_list_per_interval(void **state)
{
        struct provider_settings s = world_settings();
        struct world *w = world_new(&s);

        (void)state;
        world_put(w, w->p->clusters, CLUSTER_URL, world_cluster(&(struct world_cluster){ 0 }));
        world_put(w, NULL, BOOT_URL,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"m1-bootstrap\",\"namespace\":\"" NS "\"},\"data\":{\"value\":"
                            "\"I2Nsb3VkLWNvbmZpZwo=\"}}"));
        world_put_kubeconfig(w, "c1");
        for (unsigned i = 1; i < FLEET_N; i++)
                put_deploying(w, i, 10);
        route_fleet(w, FLEET_N - 1, "Deploying");

        /* interval 1: one list answers every machine in flight, no GET of any; a deploy
         * 10 s old is looked at again in 2 s */
        passes_of(w, 1, FLEET_N - 1);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=", NULL), 1);
        assert_int_equal(machine_gets(&w->maas), 0);
        assert_int_equal(w->res.after_ms, 2000);

        /* a machine in flight since that list: no MAAS read, it waits for the next list */
        put_deploying(w, FLEET_N, 1);
        clock_fake_advance(&w->clock, 500);
        passes_of(w, FLEET_N, FLEET_N);
        assert_int_equal(w->maas.n_reqs, 1);
        assert_int_equal(w->res.after_ms, 1500);

        /* interval 2: the next list carries all five */
        route_fleet(w, FLEET_N, "Deploying");
        clock_fake_advance(&w->clock, 1500);
        passes_of(w, 1, FLEET_N);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=", NULL), 2);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=s1&id=s2&id=s3&id=s4&id=s5", NULL),
                         1);
        assert_int_equal(machine_gets(&w->maas), 0);
        for (unsigned i = 1; i <= FLEET_N; i++) {
                char url[256];

                (void)snprintf(url, sizeof(url), INFRA_API "/maasmachines/m%u", i);
                assert_string_equal(
                        condition(world_get(w, url), SCHEMA_COND_MACHINE_DEPLOYED, "reason"),
                        SCHEMA_REASON_MACHINE_DEPLOYING);
        }

        /* interval 3: all Deployed, read from that interval's one list, all ready */
        route_fleet(w, FLEET_N, "Deployed");
        clock_fake_advance(&w->clock, 2000);
        passes_of(w, 1, FLEET_N);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=", NULL), 3);
        assert_int_equal(machine_gets(&w->maas), 0);
        for (unsigned i = 1; i <= FLEET_N; i++) {
                char url[256];

                (void)snprintf(url, sizeof(url), INFRA_API "/maasmachines/m%u", i);
                assert_true(cJSON_IsTrue(json_at(world_get(w, url), "status.ready")));
        }

        /* interval 4, one more machine in flight: the list asks for it alone, the five
         * Deployed ones having passed to the Deployed list (not read again every interval
         * until the next Deployed list), and their passes read them there: no GET */
        put_deploying(w, FLEET_N + 1, 1);
        maas_route(&w->maas, "GET", "machines/?id=s6", 200, "[%s]",
                   node_json_as("s6", "Deploying", "on", "capmaas",
                                "{\"capmaas-cluster\":\"c1\",\"capmaas-namespace\":\"ns1\","
                                "\"capmaas-machine\":\"m6\"}"));
        clock_fake_advance(&w->clock, 2000);
        passes_of(w, FLEET_N + 1, FLEET_N + 1);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=s6", NULL), 1);
        assert_int_equal(requests(&w->maas, "GET", "machines/?id=", NULL), 4);
        passes_of(w, 1, FLEET_N);
        assert_int_equal(machine_gets(&w->maas), 0);
        world_free(w);
}

int main(void)
{
        const struct CMUnitTest rollout[] = {
                cmocka_unit_test(test_rollout_rides_one_list_per_interval),
        };
        int failed = world_run_rows(rows, ARRAY_SIZE(rows), sizeof(rows[0]), run_row);

        return failed + cmocka_run_group_tests_name("rollout", rollout, NULL, NULL);
}
