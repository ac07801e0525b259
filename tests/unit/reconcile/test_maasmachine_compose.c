/*
 * Unit tests for a MaasMachine with spec.lxd.enabled (maasmachine_compose.c, docs/lxd.md): the
 * real maasmachine_reconcile() and maas_client over the fake transports (reconcile_world.h),
 * on a fake clock. Each row is one pass (or two, the second on the cache from before the
 * first) and checks what a user would notice: the MAAS calls made or not (compose, allocate,
 * delete, release), their parameters, the condition, the annotations and the requeue.
 */
#include "../../../reconcile/maasmachine.h"
#include "reconcile_world.h"

#define MM_URL      INFRA_API "/maasmachines/m1"
#define SIB_URL     INFRA_API "/maasmachines/m0"
#define MACHINE_URL CAPI_API "/machines/m1"
#define CLUSTER_URL CAPI_API "/clusters/c1"
#define BOOT_URL    CORE_API "/secrets/m1-bootstrap"
#define VM_HOST     "maas.infrastructure.cluster.x-k8s.io/vm-host"
#define VM_RETRY    "maas.infrastructure.cluster.x-k8s.io/vm-compose-retry"
#define HOSTNAME    "m1-uidm1" /* maasmachine_vm_hostname("m1", "uid-m1") */
#define OUR_STAMP \
        "{\"capmaas-cluster\":\"c1\",\"capmaas-namespace\":\"ns1\",\"capmaas-machine\":\"m1\"}"

/* The VM as MAAS shows it: status, owner (NULL = none), power type. */
static const char *vm(const char *status, const char *owner, const char *power_type)
{
        static char b[4][1024];
        static unsigned next;
        char *o = b[next++ % 4];

        (void)snprintf(o, sizeof(b[0]),
                       "{\"system_id\":\"vm0001\",\"hostname\":\"" HOSTNAME
                       "\",\"fqdn\":\"" HOSTNAME
                       ".maas\",\"zone\":{\"name\":\"az2\"},\"pool\":{\"name\":\"capi\"},"
                       "\"status_name\":\"%s\",\"power_state\":\"off\",\"power_type\":\"%s\","
                       "\"ip_addresses\":[],\"tag_names\":[],\"owner\":%s%s%s,\"owner_data\":%s}",
                       status, power_type, owner ? "\"" : "", owner ? owner : "null",
                       owner ? "\"" : "", owner ? OUR_STAMP : "{}");
        return o;
}

/* Host a (id 1, zone az1 id 11, pool capi id 21): 4 cores at a ratio of 2 with 6 used (room
 * for 2). Host b (id 2, zone az2 id 12): 8 cores, 2 used. Both 16 GiB, 100 GB. */
static const char *hosts(int a_used, int b_used)
{
        static char b[2048];

        (void)snprintf(
                b, sizeof(b),
                "[{\"id\":1,\"name\":\"a\",\"type\":\"lxd\",\"zone\":{\"name\":\"az1\",\"id\":11},"
                "\"pool\":{\"name\":\"capi\",\"id\":21},\"tags\":[],\"host\":{\"system_id\":\"h1\"}"
                ","
                "\"architectures\":[\"amd64/generic\"],\"cpu_over_commit_ratio\":2,"
                "\"memory_over_commit_ratio\":1,\"total\":{\"cores\":4,\"memory\":16384},"
                "\"used\":{\"cores\":%d,\"memory\":0},\"storage_pools\":[{\"name\":\"default\","
                "\"total\":100000000000,\"used\":0,\"default\":true}]},"
                "{\"id\":2,\"name\":\"b\",\"type\":\"lxd\",\"zone\":{\"name\":\"az2\",\"id\":12},"
                "\"pool\":{\"name\":\"capi\",\"id\":21},\"tags\":[],\"host\":{\"system_id\":\"h2\"}"
                ","
                "\"architectures\":[\"amd64/generic\"],\"cpu_over_commit_ratio\":1,"
                "\"memory_over_commit_ratio\":1,\"total\":{\"cores\":8,\"memory\":16384},"
                "\"used\":{\"cores\":%d,\"memory\":0},\"storage_pools\":[{\"name\":\"default\","
                "\"total\":100000000000,\"used\":0,\"default\":true}]}]",
                a_used, b_used);
        return b;
}

struct row {
        const char *name;
        const char *found;   /* GET machines/?hostname= answers [found], or [] when NULL */
        int a_used, b_used;  /* the hosts' used cores */
        long compose_status; /* 200, or MAAS's refusal */
        const char *compose_body;
        const char *sibling_host; /* another MaasMachine of c1 on this host (annotation) */
        const char *system_id;    /* the MaasMachine's spec.systemID, or NULL */
        bool deleting;            /* the MaasMachine is being deleted */
        const char *node;         /* GET machines/<system_id>/'s answer */
        bool stale_pass;          /* a second pass before the informer has the first's writes */
        void (*check)(struct world *w);
};

static void put_mm(struct world *w,
                   const char *url,
                   const char *name,
                   const char *uid,
                   const char *ann,
                   const char *system_id,
                   bool deleting)
{
        char ids[256] = "";

        if (system_id)
                (void)snprintf(ids, sizeof(ids),
                               ",\"systemID\":\"%s\",\"providerID\":\"maas:///az2/%s\"", system_id,
                               system_id);
        world_put(w, w->p->maasmachines, url,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\","
                            "\"kind\":\"MaasMachine\",\"metadata\":{\"name\":\"%s\","
                            "\"namespace\":\"" NS "\",\"uid\":\"%s\",\"generation\":1,"
                            "\"labels\":{\"cluster.x-k8s.io/cluster-name\":\"c1\"},"
                            "\"annotations\":%s,\"finalizers\":[\"" SCHEMA_FINALIZER_MACHINE
                            "\"]%s,\"ownerReferences\":[{\"apiVersion\":\"cluster.x-k8s.io/"
                            "v1beta1\",\"kind\":\"Machine\",\"name\":\"%s\",\"uid\":"
                            "\"uid-machine\"}]},\"spec\":{\"image\":\"ubuntu/jammy\","
                            "\"minCPU\":2,\"minMemory\":4096,\"resourcePool\":\"capi\","
                            "\"lxd\":{\"enabled\":true,\"vmConfig\":{\"diskSize\":20}}%s}}",
                            name, uid, ann,
                            deleting ? ",\"deletionTimestamp\":\"2023-11-14T22:13:00Z\"" : "", name,
                            ids));
}

static void put_objects(struct world *w, const struct row *r)
{
        char *b64 = base64_encode("#cloud-config\n", 14);
        char ann[256];

        world_put(w, w->p->clusters, CLUSTER_URL, world_cluster(&(struct world_cluster){ 0 }));
        world_put(w, w->p->machines, MACHINE_URL,
                  world_machine(
                          &(struct world_machine){ .name = "m1", .data_secret = "m1-bootstrap" }));
        world_put(w, NULL, BOOT_URL,
                  test_json("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":"
                            "\"m1-bootstrap\",\"namespace\":\"" NS "\"},\"data\":{\"value\":"
                            "\"%s\"}}",
                            b64));
        put_mm(w, MM_URL, "m1", "uid-m1", "{}", r->system_id, r->deleting);
        if (r->sibling_host) {
                (void)snprintf(ann, sizeof(ann), "{\"" VM_HOST "\":\"%s\"}", r->sibling_host);
                put_mm(w, SIB_URL, "m0", "uid-m0", ann, NULL, false);
        }
        free(b64);
}

static void arrange_maas(struct world *w, const struct row *r)
{
        const char *ready = vm("Ready", NULL, "lxd");

        maas_route(&w->maas, "GET", "machines/?agent_name=uid-m1", 200, "[]");
        maas_route(&w->maas, "GET", "machines/?hostname=" HOSTNAME, 200, "[%s]",
                   r->found ? r->found : "");
        maas_route(&w->maas, "GET", "pods/", 200, "%s", hosts(r->a_used, r->b_used));
        maas_route(&w->maas, "POST", "?op=compose", r->compose_status, "%s",
                   r->compose_body ? r->compose_body : "{\"system_id\":\"vm0001\"}");
        maas_route(&w->maas, "POST", "machines/?op=allocate", 200, "%s",
                   vm("Allocated", "capmaas", "lxd"));
        maas_route(&w->maas, "POST", "machines/vm0001/?op=set_owner_data", 200, "%s",
                   vm("Allocated", "capmaas", "lxd"));
        maas_route(&w->maas, "PUT", "machines/vm0001/", 200, "%s",
                   vm("Allocated", "capmaas", "lxd"));
        maas_route(&w->maas, "POST", "machines/vm0001/?op=deploy", 200, "%s",
                   vm("Deploying", "capmaas", "lxd"));
        maas_route(&w->maas, "DELETE", "machines/vm0001/", 204, "%s", "");
        maas_route(&w->maas, "POST", "machines/vm0001/?op=release", 200, "%s", ready);
        if (r->node)
                maas_route(&w->maas, "GET", "machines/vm0001/", 200, "%s", r->node);
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

static void check_composes_on_the_host_with_room(struct world *w)
{
        assert_int_equal(w->rc, 0);
        /* a has room for 2 cores (4 x 2 - 6); b has more: b, in its zone and pool */
        assert_int_equal(requests(&w->maas, "POST", "pods/2/?op=compose",
                                  "cores=2&memory=4096&storage=root:20(default)&hostname=" HOSTNAME
                                  "&zone=12&pool=21"),
                         1);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 0);
        assert_string_equal(annotation(w, VM_HOST), "b");
        assert_null(json_at(mm(w), "spec.providerID"));
        assert_string_equal(condition(mm(w), "MachineDeployed", "reason"), "VMComposing");
        assert_string_equal(condition(mm(w), "MachineDeployed", "message"),
                            "VM " HOSTNAME " (vm0001) composed on host b; commissioning");
        assert_int_equal(w->res.after_ms, 5000);
}

static void check_spreads_over_the_cluster(struct world *w)
{
        /* b has more room, but holds the cluster's other VM */
        assert_int_equal(requests(&w->maas, "POST", "pods/1/?op=compose", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "pods/2/?op=compose", NULL), 0);
        assert_string_equal(annotation(w, VM_HOST), "a");
}

static void check_adopts_the_vm_of_its_hostname(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=compose", NULL), 0);
        assert_int_equal(requests(&w->maas, "GET", "pods/", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "machines/?op=allocate",
                                  "system_id=vm0001&agent_name=uid-m1"),
                         1);
        assert_int_equal(requests(&w->maas, "POST", "vm0001/?op=deploy", NULL), 1);
        assert_string_equal(json_find_str(mm(w), "spec", "providerID", NULL), "maas:///az2/vm0001");
}

static void check_waits_while_commissioning(struct world *w)
{
        assert_int_equal(requests(&w->maas, "POST", "op=compose", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 0);
        assert_string_equal(condition(mm(w), "MachineDeployed", "message"),
                            "VM " HOSTNAME " (vm0001) is commissioning");
        assert_int_equal(w->res.after_ms, 5000);
}

static void check_never_takes_a_server_of_its_hostname(struct world *w)
{
        assert_int_equal(requests(&w->maas, "POST", "op=allocate", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "op=compose", NULL), 0);
        assert_int_equal(requests(&w->maas, "DELETE", "machines/", NULL), 0);
        assert_non_null(strstr(condition(mm(w), "MachineDeployed", "message"), "is no VM"));
}

static void check_no_host_names_the_closest(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=compose", NULL), 0);
        assert_string_equal(condition(mm(w), "MachineDeployed", "reason"), "VMHostUnavailable");
        assert_string_equal(condition(mm(w), "MachineDeployed", "message"),
                            "no MAAS VM host fits cores=2 memory=4096MiB disk=20GB pool=capi: "
                            "the closest, b, lacks cores (1 free, 2 wanted); retrying in 10s");
        assert_string_equal(annotation(w, VM_RETRY), "1 1700000010");
        assert_int_equal(w->res.after_ms, 10000);
}

static void check_stale_pass_keeps_the_backoff(struct world *w)
{
        assert_int_equal(requests(&w->maas, "GET", "pods/", NULL), 1); /* not again at once */
        assert_int_equal(w->res.outcome, RECONCILE_REQUEUE_AFTER);
        assert_int_equal(w->res.after_ms, 10000);
}

static void check_capacity_refusal_backs_off(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=compose", NULL), 1); /* never repeated */
        assert_string_equal(condition(mm(w), "MachineDeployed", "reason"), "VMHostUnavailable");
        assert_non_null(strstr(condition(mm(w), "MachineDeployed", "message"),
                               "MAAS refused to compose the VM on host b: Unable to compose KVM "
                               "instance in 'b'."));
        assert_string_equal(annotation(w, VM_RETRY), "1 1700000010");
}

static void check_taken_hostname_looks_again(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "POST", "op=compose", NULL), 1);
        assert_null(
                annotation(w, VM_RETRY)); /* no backoff: the VM exists, the next pass finds it */
        assert_int_equal(w->res.after_ms, 1000);
}

static void check_deleting_vm_is_deleted_not_released(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "DELETE", "machines/vm0001/", NULL), 1);
        assert_int_equal(requests(&w->maas, "POST", "op=release", NULL), 0);
        assert_false(has_finalizer(mm(w), SCHEMA_FINALIZER_MACHINE));
}

static void check_deleting_server_is_released_not_deleted(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "DELETE", "machines/", NULL), 0);
        assert_int_equal(requests(&w->maas, "POST", "vm0001/?op=release", NULL), 1);
}

static void check_deleting_composed_vm_never_allocated(struct world *w)
{
        assert_int_equal(w->rc, 0);
        assert_int_equal(requests(&w->maas, "DELETE", "machines/vm0001/", NULL), 1);
        assert_false(has_finalizer(mm(w), SCHEMA_FINALIZER_MACHINE));
}

static const struct row rows[] = {
        { .name = "composes_on_the_host_with_room",
          .a_used = 6,
          .b_used = 2,
          .compose_status = 200,
          .check = check_composes_on_the_host_with_room },
        { .name = "spreads_over_the_cluster",
          .a_used = 4,
          .b_used = 0,
          .compose_status = 200,
          .sibling_host = "b",
          .check = check_spreads_over_the_cluster },
        { .name = "adopts_the_vm_of_its_hostname_after_a_crash",
          .found = "{\"system_id\":\"vm0001\",\"hostname\":\"" HOSTNAME "\",\"status_name\":"
                   "\"Ready\",\"power_type\":\"lxd\",\"owner\":null,\"zone\":{\"name\":\"az2\"}}",
          .compose_status = 200,
          .check = check_adopts_the_vm_of_its_hostname },
        { .name = "waits_while_maas_commissions_it",
          .found = "{\"system_id\":\"vm0001\",\"hostname\":\"" HOSTNAME "\",\"status_name\":"
                   "\"Commissioning\",\"power_type\":\"lxd\",\"owner\":null}",
          .compose_status = 200,
          .check = check_waits_while_commissioning },
        { .name = "never_takes_a_server_of_its_hostname",
          .found = "{\"system_id\":\"abc123\",\"hostname\":\"" HOSTNAME "\",\"status_name\":"
                   "\"Ready\",\"power_type\":\"ipmi\",\"owner\":null}",
          .compose_status = 200,
          .check = check_never_takes_a_server_of_its_hostname },
        { .name = "no_host_fits_names_the_closest_and_what_it_lacks",
          .a_used = 8,
          .b_used = 7,
          .compose_status = 200,
          .check = check_no_host_names_the_closest },
        { .name = "a_stale_pass_keeps_the_backoff",
          .a_used = 8,
          .b_used = 7,
          .compose_status = 200,
          .stale_pass = true,
          .check = check_stale_pass_keeps_the_backoff },
        { .name = "maas_capacity_refusal_backs_off",
          .a_used = 6,
          .b_used = 2,
          .compose_status = 503,
          .compose_body = "Unable to compose KVM instance in 'b'. CPU overcommit ratio is 1 and "
                          "there are 1 available resources; 2 requested.",
          .check = check_capacity_refusal_backs_off },
        { .name = "a_taken_hostname_looks_again",
          .a_used = 6,
          .b_used = 2,
          .compose_status = 400,
          .compose_body =
                  "{\"hostname\":[\"Node with hostname \\\"" HOSTNAME "\\\" already exists\"]}",
          .check = check_taken_hostname_looks_again },
        { .name = "a_deleting_vm_is_deleted_not_released",
          .system_id = "vm0001",
          .node = "{\"system_id\":\"vm0001\",\"hostname\":\"" HOSTNAME "\",\"status_name\":"
                  "\"Deployed\",\"power_type\":\"lxd\",\"owner\":\"capmaas\",\"owner_"
                  "data\":" OUR_STAMP ",\"zone\":{\"name\":\"az2\"},\"ip_addresses\":[]}",
          .compose_status = 200,
          .deleting = true,
          .check = check_deleting_vm_is_deleted_not_released },
        { .name = "a_deleting_server_under_lxd_is_released_not_deleted",
          .system_id = "vm0001",
          .node = "{\"system_id\":\"vm0001\",\"hostname\":\"srv\",\"status_name\":\"Deployed\","
                  "\"power_type\":\"ipmi\",\"owner\":\"capmaas\",\"owner_data\":" OUR_STAMP
                  ",\"zone\":{\"name\":\"az2\"},\"ip_addresses\":[]}",
          .compose_status = 200,
          .deleting = true,
          .check = check_deleting_server_is_released_not_deleted },
        { .name = "a_deleting_machine_deletes_the_vm_composed_for_it",
          .found = "{\"system_id\":\"vm0001\",\"hostname\":\"" HOSTNAME "\",\"status_name\":"
                   "\"Commissioning\",\"power_type\":\"lxd\",\"owner\":null}",
          .compose_status = 200,
          .deleting = true,
          .check = check_deleting_composed_vm_never_allocated },
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
