#pragma once
/*
 * reconcile_fixture: the MaasCluster and MaasMachine reconcilers (a provider) against the
 * management and workload kube-sims of clusters.h and a maas-sim (the sample inventory,
 * deploys of 0.3 s, releases of 0.1 s), over real loopback TLS/HTTP. The test plays the
 * CAPI core controllers: it creates the Cluster, Machine, bootstrap Secret and kubeconfig
 * Secret itself (make_*), and reads what the provider writes into Kubernetes and MAAS.
 *
 * Each test (rf_setup/rf_teardown) gets a fresh maas-sim, namespace and provider; the
 * group (rf_group_setup/rf_group_teardown) shares the kube-sims. Helpers fail the running
 * cmocka test instead of returning errors; waits are bounded by CLUSTERS_WAIT_MS.
 */

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "clusters.h"
#include "maas_client.h"
#include "maassim.h"
#include "metrics.h"
#include "provider.h"

#define MAAS_KEY "ck1:tk1:ts1"

struct reconcile_fixture {
        struct maassim sim;
        struct maas_config mcfg;
        struct http_transport *mt;
        struct maas_client *maas; /* the test's own client of sim */
        struct provider *prov;
        struct metrics *metrics;
};

extern struct reconcile_fixture RF;

int rf_group_setup(void **state);
int rf_group_teardown(void **state);
int rf_setup(void **state);
int rf_teardown(void **state);

/* As capmaas --deploy-timeout 30s --sync-period 10m --machine-concurrency 4 --namespace NS,
 * the rest at their defaults. */
struct provider_settings test_settings(void);
/* Starts RF.prov with settings s and a fresh RF.metrics (both freed by rf_teardown). */
void start_provider(const struct provider_settings *s);
/* The provider's metrics as Prometheus text (malloc'd). */
char *render_metrics(void);
/* Waits (bounded) until the rendered metrics hold the line `series value` (e.g.
 * "capmaas_maasmachines{phase=\"ready\"} 1"); fails the test with the text otherwise. */
void wait_metric(const char *line);

/* cl_wait predicates: status.ready, status.machinePowered false, and a condition
 * (arg: const char *[3] { type, status, reason }). */
bool pred_ready(const cJSON *o, const void *arg);
bool pred_unpowered(const cJSON *o, const void *arg);
bool pred_cond_reason(const cJSON *o, const void *arg);

/* --- the CAPI side, played by the test --------------------------------------------------- */

/* metadata.uid of r/name, copied into out. */
const char *UID_OF(const struct kube_resource *r, const char *name, char out[64]);
/* A Cluster and its MaasCluster (failure domains az1, az2), the Cluster's infrastructure
 * marked provisioned when infra_ready. */
void make_cluster(const char *name, bool infra_ready);
/* <cluster>-kubeconfig: the workload kube-sim's kubeconfig. */
void make_kubeconfig_secret(const char *cluster);

struct machine_spec {
        const char *extra_spec; /* JSON members for the MaasMachine spec, or NULL */
        bool control_plane;
        bool bootstrap;
};

/* A Machine, its bootstrap Secret and its MaasMachine (ubuntu/jammy, 1 CPU, 1 GiB). */
void make_machine(const char *cluster, const char *name, const struct machine_spec *s);
/* make_cluster + kubeconfig, waits until the API server is available; the endpoint host
 * (malloc'd). */
char *ready_cluster(const char *name);
/* make_machine, waits until Ready; its system ID (malloc'd). */
char *ready_machine(const char *cluster, const char *name, const struct machine_spec *s);

/* --- what MAAS and the workload cluster say ------------------------------------------------ */

/* Number of MAAS machines not Ready (allocated, deploying, deployed, ...). */
int maas_in_use(void);
/* Whether machine sid of sim carries tag (sim's /_sim/state). */
bool sim_machine_tagged(struct maassim *sim, const char *sid, const char *tag);
/* How often needle occurs in maas-sim's request log. */
int maas_count_requests(const char *needle);
/* Events in the test namespace with this reason. */
int events_with(const char *reason);
void wait_event(const char *reason);
void wait_events(const char *reason, int n);
/* The first ExternalIP in a MaasMachine's status.addresses (borrowed), or NULL. */
const char *mm_external_ip(const cJSON *mm);
/* The DNS record fqdn exists (and holds ip unless ip is NULL). */
bool record_has(const char *fqdn, const char *ip);
/* DNS records other than the VIPs' ownership records (capmaas-vip-<uid>). */
int n_records(void);
/* The workload Node named hostname, once capmaas has set its providerID. */
cJSON *wait_node_provider_id(const char *hostname);
/* Its topology.kubernetes.io/zone label, or NULL. */
const char *node_zone_label(const cJSON *wnode);
