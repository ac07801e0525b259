/*
 * No field of our CRDs is accepted and then ignored (issue #21): every member of every
 * kind's spec, as the schema tables list it (schema_spec_fields, the tables the CRDs are
 * written from), has a row below saying where it takes effect, or is DENIED at admission.
 * A new field without a row fails this test, and so does a row for a field that is gone.
 * Each denied row carries a spec fragment that sets the field, and the test shows the
 * validating webhook refusing it with an error naming the field, for the kind and its
 * template.
 *
 * Adding a CRD field: add its row (where it is used: the module and what it becomes in MAAS
 * or Kubernetes), or deny it in the webhooks and add a DENIED row with the fragment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "../../../webhooks/webhook_kinds.h"
#include "admission.h"
#include "schema.h"
#include "testutil.h"
#include "xalloc.h"

enum spec_type { MACHINE, CLUSTER, REMEDIATION };

#define DENIED NULL

struct row {
        enum spec_type type;
        const char *path; /* relative to the spec, as schema_spec_fields names it */
        const char *used; /* where it takes effect; DENIED when admission refuses it */
        const char *deny; /* DENIED rows: spec members that set it (JSON, after the base) */
};

#define LXD_COMPOSE "reconcile/maasmachine_compose.c: a VM composed on a VM host (docs/lxd.md)"
#define LXD_VM      "'lxd':{'enabled':true,'vmConfig':"
#define LAYOUT      "reconcile/maasmachine_storage.c: set_storage_layout "
#define STATIC_IP   "reconcile/maasmachine_network.c: STATIC link in MAAS (docs/static-ips.md)"
#define IPAM        "reconcile/maasmachine_ipam.c: the IPAddressClaim's poolRef"
#define LXD_HOSTS   "'lxdConfig':{'enabled':true,"
#define REUSE       "reconcile/maasmachine_reuse.c: "
#define VIP         "reconcile/maascluster_vip.c: the VIP reserved in MAAS (docs/endpoints.md)"

static const struct row rows[] = {
        /* MaasMachine and MaasMachineTemplate (spec.template.spec) */
        { MACHINE, "failureDomain", "reconcile/maasmachine_allocate.c: allocate zone", NULL },
        { MACHINE, "systemID", "written by the controller: the allocated MAAS machine", NULL },
        /* without lxd.enabled; a VM's: the host's machine (maasmachine_compose.c) */
        { MACHINE, "parent", DENIED, "'parent':'abc123'" },
        { MACHINE, "providerID", "written by the controller; Cluster API copies it", NULL },
        { MACHINE, "resourcePool", "reconcile/maasmachine_allocate.c: allocate pool", NULL },
        { MACHINE, "minCPU", "reconcile/maasmachine_allocate.c: allocate cpu_count", NULL },
        { MACHINE, "minMemory", "reconcile/maasmachine_allocate.c: allocate mem", NULL },
        { MACHINE, "minDiskSize", "reconcile/maasmachine_allocate.c: allocate storage", NULL },
        { MACHINE, "tags", "reconcile/maasmachine_allocate.c: allocate tags", NULL },
        { MACHINE, "image", "reconcile/maasmachine_deploy.c: deploy osystem, distro_series", NULL },
        { MACHINE, "deployInMemory", "reconcile/maasmachine_deploy.c: deploy ephemeral_deploy",
          NULL },
        { MACHINE, "lxd", LXD_COMPOSE, NULL },
        { MACHINE, "lxd.enabled", LXD_COMPOSE, NULL },
        { MACHINE, "lxd.vmConfig", LXD_COMPOSE, NULL },
        { MACHINE, "lxd.vmConfig.diskSize", "reconcile/maasmachine_compose.c: compose storage",
          NULL },
        { MACHINE, "lxd.vmConfig.storagePool",
          "reconcile/maasmachine_compose.c: compose storage's pool", NULL },
        { MACHINE, "lxd.vmConfig.network", DENIED, LXD_VM "{'network':'br0'}}" },
        { MACHINE, "lxd.vmConfig.interfaceLinkModes", DENIED,
          LXD_VM "{'interfaceLinkModes':{'eth0':'static'}}}" },
        /* true (the default) is what MAAS does; false is refused */
        { MACHINE, "lxd.vmConfig.autoStart", DENIED, LXD_VM "{'autoStart':false}}" },
        { MACHINE, "staticIP", STATIC_IP, NULL },
        { MACHINE, "staticIP.ip", STATIC_IP, NULL },
        { MACHINE, "staticIP.cidr", STATIC_IP, NULL },
        { MACHINE, "staticIP.gateway", STATIC_IP, NULL },
        { MACHINE, "staticIP.nameservers", STATIC_IP, NULL },
        { MACHINE, "staticIP.interface", STATIC_IP, NULL },
        { MACHINE, "addressesFromPools", IPAM, NULL },
        { MACHINE, "addressesFromPools[].apiGroup", IPAM, NULL },
        { MACHINE, "addressesFromPools[].kind", IPAM, NULL },
        { MACHINE, "addressesFromPools[].name", IPAM, NULL },
        { MACHINE, "hweKernel", "reconcile/maasmachine_deploy.c: deploy hwe_kernel", NULL },
        { MACHINE, "architecture", "reconcile/maasmachine_allocate.c: allocate arch", NULL },
        { MACHINE, "excludeTags", "reconcile/maasmachine_allocate.c: allocate not_tags", NULL },
        { MACHINE, "storageLayout", LAYOUT "before the allocate", NULL },
        { MACHINE, "storageLayout.type", LAYOUT "storage_layout", NULL },
        { MACHINE, "storageLayout.bootSize", LAYOUT "boot_size", NULL },
        { MACHINE, "storageLayout.rootSize", LAYOUT "root_size", NULL },
        { MACHINE, "storageLayout.vgName", LAYOUT "vg_name", NULL },
        { MACHINE, "storageLayout.lvName", LAYOUT "lv_name", NULL },
        { MACHINE, "storageLayout.lvSize", LAYOUT "lv_size", NULL },
        { MACHINE, "storageLayout.cacheMode", LAYOUT "cache_mode", NULL },
        { MACHINE, "storageLayout.cacheSize", LAYOUT "cache_size", NULL },
        { MACHINE, "storageLayout.cacheNoPart", LAYOUT "cache_no_part", NULL },
        { MACHINE, "nodeReuse", REUSE "the owner's reuse tag, kept hosts allocated first", NULL },
        { MACHINE, "release", "reconcile/maasmachine_release.c: release erase options", NULL },
        { MACHINE, "release.erase",
          "reconcile/maasmachine_release.c: erase, quick_erase, "
          "secure_erase",
          NULL },

        /* MaasCluster and MaasClusterTemplate */
        { CLUSTER, "dnsDomain", "reconcile/maascluster.c: the API-server DNS record's domain",
          NULL },
        { CLUSTER, "controlPlaneEndpoint", "reconcile/maascluster.c: the endpoint", NULL },
        { CLUSTER, "controlPlaneEndpoint.host", "reconcile/maascluster.c: the endpoint", NULL },
        { CLUSTER, "controlPlaneEndpoint.port", "reconcile/maascluster.c: the endpoint", NULL },
        { CLUSTER, "failureDomains", "reconcile/maascluster.c: status.failureDomains", NULL },
        { CLUSTER, "lxdConfig", DENIED, LXD_HOSTS "'zone':'az1'}" },
        { CLUSTER, "lxdConfig.enabled", DENIED, "'lxdConfig':{'enabled':true}" },
        { CLUSTER, "lxdConfig.resourcePool", DENIED, LXD_HOSTS "'resourcePool':'capi'}" },
        { CLUSTER, "lxdConfig.zone", DENIED, LXD_HOSTS "'zone':'az1'}" },
        { CLUSTER, "lxdConfig.storageBackend", DENIED, LXD_HOSTS "'storageBackend':'zfs'}" },
        { CLUSTER, "lxdConfig.storageSize", DENIED, LXD_HOSTS "'storageSize':'50'}" },
        { CLUSTER, "lxdConfig.nicType", DENIED, LXD_HOSTS "'nicType':'bridge'}" },
        { CLUSTER, "lxdConfig.nicParent", DENIED, LXD_HOSTS "'nicParent':'br0'}" },
        { CLUSTER, "lxdConfig.networkBridge", DENIED, LXD_HOSTS "'networkBridge':'br0'}" },
        { CLUSTER, "lxdConfig.skipNetworkUpdate", DENIED, LXD_HOSTS "'skipNetworkUpdate':true}" },
        { CLUSTER, "dnsRecordAddresses", "reconcile/maascluster_addresses.c", NULL },
        { CLUSTER, "dnsRecordAddresses.cidr", "reconcile/maascluster_addresses.c", NULL },
        { CLUSTER, "dnsRecordAddresses.interface", "reconcile/maascluster_addresses.c", NULL },
        { CLUSTER, "identityRef", "reconcile/maas_identity.c: the cluster's own MAAS", NULL },
        { CLUSTER, "identityRef.kind", "webhooks/validate_cluster.c: Secret only", NULL },
        { CLUSTER, "identityRef.name", "reconcile/maas_identity.c: the Secret read", NULL },
        { CLUSTER, "endpoint", "reconcile/maascluster.c: the endpoint type (docs/endpoints.md)",
          NULL },
        { CLUSTER, "endpoint.type", "reconcile/maascluster.c: DNS record, VIP or External", NULL },
        { CLUSTER, "endpoint.address", VIP " op=reserve ip", NULL },
        { CLUSTER, "endpoint.subnet", VIP " op=reserve subnet", NULL },
        { CLUSTER, "endpoint.dnsRecord", "reconcile/maascluster.c: vip_record, a MAAS DNS record",
          NULL },

        /* MaasRemediation and MaasRemediationTemplate */
        { REMEDIATION, "strategy", "reconcile/maasremediation.c", NULL },
        { REMEDIATION, "strategy.type", "reconcile/maasremediation.c: Reboot", NULL },
        { REMEDIATION, "strategy.retryLimit", "reconcile/maasremediation.c: power cycles", NULL },
        { REMEDIATION, "strategy.timeout", "reconcile/maasremediation.c: the wait per cycle",
          NULL },
};

static const struct {
        const char *kind;
        enum spec_type type;
        bool tmpl;
} kinds[] = {
        { SCHEMA_KIND_MACHINE, MACHINE, false },
        { SCHEMA_KIND_MACHINE_TEMPLATE, MACHINE, true },
        { SCHEMA_KIND_CLUSTER, CLUSTER, false },
        { SCHEMA_KIND_CLUSTER_TEMPLATE, CLUSTER, true },
        { SCHEMA_KIND_REMEDIATION, REMEDIATION, false },
        { SCHEMA_KIND_REMEDIATION_TEMPLATE, REMEDIATION, true },
};

struct walk {
        enum spec_type type;
        const char *kind;
        bool seen[sizeof(rows) / sizeof(rows[0])];
        unsigned missing;
};

static void on_field(void *ud, const char *path)
{
        struct walk *w = ud;

        for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                if (rows[i].type == w->type && strcmp(rows[i].path, path) == 0) {
                        w->seen[i] = true;
                        return;
                }
        print_error("%s spec field %s has no row: say where it takes effect or deny it\n", w->kind,
                    path);
        w->missing++;
}

static void test_field_coverage__every_spec_field_has_a_row(void **state)
{
        (void)state;
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
                struct walk w = { .type = kinds[k].type, .kind = kinds[k].kind };
                long n = schema_spec_fields(kinds[k].kind, on_field, &w);

                assert_true(n > 0);
                assert_int_equal(w.missing, 0);
                for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                        if (rows[i].type == w.type && !w.seen[i])
                                fail_msg("row %s of %s names no field of the schema", rows[i].path,
                                         kinds[k].kind);
                for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                        assert_true(rows[i].used || rows[i].deny); /* a denial shows itself */
        }
}

static const char *const base[] = {
        [MACHINE] = "'image':'ubuntu/jammy','minCPU':2,'minMemory':4096,",
        [CLUSTER] = "'dnsDomain':'maas',",
        [REMEDIATION] = "",
};

/* ' for " */
static char *dq(const char *s)
{
        char *o = xstrdup(s);

        for (char *p = o; *p; p++)
                if (*p == '\'')
                        *p = '"';
        return o;
}

static void expect_denied(const char *kind, bool tmpl, enum spec_type t, const struct row *r)
{
        const char *path = tmpl ? "spec.template.spec" : "spec";
        char *spec = xasprintf("{%s%s}", base[t], r->deny);
        char *body = tmpl ? xasprintf("{'template':{'spec':%s}}", spec) : xstrdup(spec);
        char *doc = xasprintf("{'apiVersion':'infrastructure.cluster.x-k8s.io/v1beta1','kind':'%s',"
                              "'metadata':{'name':'x','namespace':'default'},'spec':%s}",
                              kind, body);
        char *json = dq(doc);
        char *field = xasprintf("%s.%s", path, r->path);
        char *parent = xstrndup(field, (size_t)(strrchr(field, '.') - field));
        struct admission_request req = { .op = ADMISSION_OP_CREATE, .object = cJSON_Parse(json) };
        struct admission_response resp = { 0 };

        assert_non_null(req.object);
        webhook_validate(kind, &req, &resp);
        if (resp.allowed)
                fail_msg("%s %s allowed: it would be accepted and ignored", kind, field);
        /* the error names the field, or the object it is part of (lxdConfig.enabled) */
        if (!strstr(resp.message, field) &&
            (strcmp(parent, path) == 0 || !strstr(resp.message, parent)))
                fail_msg("%s %s denied without naming it: %s", kind, field, resp.message);
        admission_response_release(&resp);
        cJSON_Delete(req.object);
        free(parent);
        free(field);
        free(json);
        free(doc);
        free(body);
        free(spec);
}

static void test_field_coverage__each_denied_field_is_refused(void **state)
{
        unsigned denied = 0;

        (void)state;
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                if (rows[i].used)
                        continue;
                for (size_t k = 0; k < ARRAY_SIZE(kinds); k++)
                        if (kinds[k].type == rows[i].type)
                                expect_denied(kinds[k].kind, kinds[k].tmpl, rows[i].type, &rows[i]);
                denied++;
        }
        assert_true(denied >= 2); /* parent, lxdConfig */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_field_coverage__every_spec_field_has_a_row),
                cmocka_unit_test(test_field_coverage__each_denied_field_is_refused),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
