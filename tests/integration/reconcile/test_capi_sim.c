/*
 * capi-sim against two kube-sims (management and workload): the test installs the CRDs,
 * applies Cluster/KubeadmControlPlane/MachineDeployment objects and plays the
 * infrastructure provider itself (it writes MaasCluster/MaasMachine status), then checks
 * what capi-sim writes: ownership, Machines and MaasMachines from templates, bootstrap and
 * kubeconfig Secrets, Nodes, status mirrors, scale down and cluster deletion (issue 8).
 */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base64.h"
#include "clusters.h"
#include "err.h"
#include "json.h"
#include "kube_client.h"
#include "kubesim.h"
#include "simproc.h"
#include "testutil.h"
#include "xalloc.h"

static struct simproc capi;

/* --- helpers ------------------------------------------------------------------------------------
 */

static double at_num(const cJSON *o, const char *path)
{
        const cJSON *x = json_at(o, path);

        return cJSON_IsNumber(x) ? x->valuedouble : -1;
}

static const char *label(const cJSON *o, const char *key)
{
        const cJSON *l = json_at(json_at(o, "metadata"), "labels");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(l, key);

        return cJSON_IsString(x) ? x->valuestring : NULL;
}

static const char *annotation(const cJSON *o, const char *key)
{
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(json_at(o, "metadata.annotations"), key);

        return cJSON_IsString(x) ? x->valuestring : NULL;
}

static bool pred_exists(const cJSON *o, const void *arg)
{
        (void)o;
        (void)arg;
        return true;
}

/* arg: "path=value" (a string field), or "path" alone for a JSON true. */
static bool pred_field(const cJSON *o, const void *arg)
{
        const char *eq = strchr(arg, '=');
        char path[128];

        if (!eq)
                return cJSON_IsTrue(json_at(o, arg));
        snprintf(path, sizeof(path), "%.*s", (int)(eq - (const char *)arg), (const char *)arg);
        if (cJSON_IsNumber(json_at(o, path)))
                return at_num(o, path) == strtod(eq + 1, NULL);
        return json_at_str(o, path) && strcmp(json_at_str(o, path), eq + 1) == 0;
}

/* arg: "labelkey=value". */
static bool pred_label(const cJSON *o, const void *arg)
{
        const char *eq = strchr(arg, '=');
        char key[128];

        snprintf(key, sizeof(key), "%.*s", (int)(eq - (const char *)arg), (const char *)arg);
        return label(o, key) && strcmp(label(o, key), eq + 1) == 0;
}

static bool pred_finalizer(const cJSON *o, const void *arg)
{
        const cJSON *f;

        cJSON_ArrayForEach (f, json_at(o, "metadata.finalizers")) {
                if (cJSON_IsString(f) && strcmp(f->valuestring, arg) == 0)
                        return true;
        }
        return false;
}

static char *file_b64(const char *path)
{
        char *text = xmalloc(1 << 16), *b64;
        FILE *f = fopen(path, "rb");
        size_t n;

        assert_non_null(f);
        n = fread(text, 1, (1 << 16) - 1, f);
        fclose(f);
        b64 = base64_encode(text, n);
        free(text);
        return b64;
}

/* --- simulators and CRDs --------------------------------------------------------------------- */

static void start_capi_sim(void)
{
        assert_int_equal(simproc_start(&capi, "capi-sim",
                                       (const char *const[]){
                                               "--kubeconfig", CL.mgmt.kubeconfig,
                                               "--workload-kubeconfig", CL.workload.kubeconfig,
                                               "--capi-contract", "v1beta1", "--port", "0", NULL }),
                         0);
}

static int group_setup(void **state)
{
        (void)state;
        if (clusters_setup() < 0)
                return -1;
        start_capi_sim();
        return 0;
}

static int group_teardown(void **state)
{
        int capi_status = capi.pid > 0 ? simproc_stop(&capi) : 0;

        (void)state;
        clusters_teardown();
        assert_int_equal(capi_status, 0); /* a clean exit on SIGTERM */
        return 0;
}

static int setup(void **state)
{
        (void)state;
        clusters_new_namespace();
        return 0;
}

/* --- the user's objects ------------------------------------------------------------------- */

static void make_cluster_only(const char *name)
{
        cl_create(&KUBE_RES_CLUSTERS,
                  test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\","
                            "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"controlPlaneRef\":{"
                            "\"apiVersion\":"
                            "\"controlplane.cluster.x-k8s.io/"
                            "v1beta1\",\"kind\":\"KubeadmControlPlane\","
                            "\"name\":\"%s-cp\"},\"infrastructureRef\":{\"apiVersion\":"
                            "\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":\"MaasCluster\","
                            "\"name\":\"%s\"}}}",
                            name, name, name));
}

static void make_maascluster(const char *name)
{
        cl_create(
                &KUBE_RES_MAASCLUSTERS,
                test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                          "\"MaasCluster\",\"metadata\":{\"name\":\"%s\"},\"spec\":{\"dnsDomain\":"
                          "\"maas\"}}",
                          name));
}

static void make_cluster(const char *name)
{
        make_cluster_only(name);
        make_maascluster(name);
}

static void make_template(const char *name, int cpu, int mem)
{
        cl_create(&KUBE_RES_MAASMACHINETEMPLATES,
                  test_json("{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/v1beta1\",\"kind\":"
                            "\"MaasMachineTemplate\",\"metadata\":{\"name\":\"%s\"},\"spec\":{"
                            "\"template\":{\"spec\":{\"image\":\"u-2204-0-k-1264-0\",\"minCPU\":%d,"
                            "\"minMemory\":%d,\"resourcePool\":\"capi\"}}}}",
                            name, cpu, mem));
}

static void make_kcp(const char *cluster, int cp)
{
        make_template("cp-tmpl", 4, 8192);
        cl_create(
                &CL_KCPS,
                test_json("{\"apiVersion\":\"controlplane.cluster.x-k8s.io/v1beta1\",\"kind\":"
                          "\"KubeadmControlPlane\",\"metadata\":{\"name\":\"%s-cp\"},\"spec\":{"
                          "\"replicas\":%d,\"version\":\"v1.26.4\",\"machineTemplate\":{"
                          "\"infrastructureRef\":{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/"
                          "v1beta1\",\"kind\":\"MaasMachineTemplate\",\"name\":\"cp-tmpl\"}}}}",
                          cluster, cp));
}

static void make_kcp_md(const char *cluster, int cp, int md)
{
        make_kcp(cluster, cp);
        make_template("md-tmpl", 2, 4096);
        cl_create(&CL_MDS,
                  test_json("{\"apiVersion\":\"cluster.x-k8s.io/"
                            "v1beta1\",\"kind\":\"MachineDeployment\","
                            "\"metadata\":{\"name\":\"%s-md\"},\"spec\":{\"clusterName\":\"%s\","
                            "\"replicas\":%d,\"template\":{\"spec\":{\"clusterName\":\"%s\","
                            "\"version\":"
                            "\"v1.26.4\",\"infrastructureRef\":{\"apiVersion\":\"infrastructure."
                            "cluster."
                            "x-k8s.io/v1beta1\",\"kind\":\"MaasMachineTemplate\",\"name\":"
                            "\"md-tmpl\"}}}}}",
                            cluster, cluster, md, cluster));
}

/* --- the provider's part, played by the test ------------------------------------------------ */

static void provision_cluster(const char *name)
{
        cl_patch(&KUBE_RES_MAASCLUSTERS, name, NULL,
                 "{\"spec\":{\"controlPlaneEndpoint\":{\"host\":\"demo.maas\",\"port\":6443}}}");
        cl_patch(&KUBE_RES_MAASCLUSTERS, name, "status",
                 "{\"status\":{\"ready\":true,\"initialization\":{\"provisioned\":true}}}");
}

static unsigned host_seq;

/* Marks MaasMachine name deployed as hostname "<ns>-Host-<n>"; returns the Node name. */
static char *deploy(const char *name)
{
        char *body, *host;
        unsigned n = ++host_seq;

        host = xasprintf("%s-Host-%u", CL.ns, n);
        body = xasprintf("{\"spec\":{\"providerID\":\"maas:///az1/sys%u\"}}", n);
        cl_patch(&KUBE_RES_MAASMACHINES, name, NULL, body);
        free(body);
        body = xasprintf("{\"status\":{\"ready\":true,\"initialization\":{\"provisioned\":true},"
                         "\"hostname\":\"%s\",\"addresses\":[{\"type\":\"InternalIP\","
                         "\"address\":\"10.20.0.%u\"}]}}",
                         host, n);
        cl_patch(&KUBE_RES_MAASMACHINES, name, "status", body);
        free(body);
        for (char *p = host; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return host;
}

/* Deploys every machine of the list that is not ready yet. */
static void deploy_all(const cJSON *machines)
{
        const cJSON *m;

        cJSON_ArrayForEach (m, json_at(machines, "items")) {
                const char *name = json_at_str(m, "metadata.name");
                cJSON *mm = cl_wait(&KUBE_RES_MAASMACHINES, name, pred_exists, NULL);

                if (!cJSON_IsTrue(json_at(mm, "status.ready")))
                        free(deploy(name));
                cJSON_Delete(mm);
        }
}

/* Waits until n Machines match selector and deploys those not ready yet. */
static void deploy_machines(const char *selector, int n)
{
        cJSON *l = cl_wait_count(&KUBE_RES_MACHINES, selector, n);

        deploy_all(l);
        cJSON_Delete(l);
}

/* How many workload Nodes say they belong to Machine ns/name (any Machine of ns when
 * machine is NULL). */
static int nodes_of(const char *machine)
{
        cJSON *l = cl_list(&KUBE_RES_NODES, NULL);
        const cJSON *n;
        int found = 0;

        cJSON_ArrayForEach (n, json_at(l, "items")) {
                const char *m = annotation(n, "cluster.x-k8s.io/machine");
                const char *ns = annotation(n, "cluster.x-k8s.io/cluster-namespace");

                found += m && ns && (!machine || strcmp(m, machine) == 0) && strcmp(ns, CL.ns) == 0;
        }
        cJSON_Delete(l);
        return found;
}

#define SEL_CP "cluster.x-k8s.io/control-plane"
#define SEL_MD "cluster.x-k8s.io/deployment-name"

/* --- tests --------------------------------------------------------------------------------------
 */

static void test_capi_sim__serves_healthz_once_synced(void **state)
{
        long status = 0;
        unsigned port = 0;
        char *body;

        (void)state;
        assert_int_equal(sscanf(capi.url, "http://127.0.0.1:%u", &port), 1);
        body = test_http_get((uint16_t)port, "/healthz", &status);
        assert_int_equal(status, 200);
        assert_str(body, "ok");
        free(body);
}

static void test_capi_sim__cluster_owns_maascluster_and_mirrors_it(void **state)
{
        cJSON *mc, *cl;
        const cJSON *ref;

        (void)state;
        make_cluster("c1");
        cl = cl_wait(&KUBE_RES_CLUSTERS, "c1", pred_finalizer, "cluster.cluster.x-k8s.io");
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "c1", pred_label, "cluster.x-k8s.io/cluster-name=c1");
        ref = cJSON_GetArrayItem(json_at(mc, "metadata.ownerReferences"), 0);
        assert_str(json_at_str(ref, "kind"), "Cluster");
        assert_str(json_at_str(ref, "apiVersion"), "cluster.x-k8s.io/v1beta1");
        assert_str(json_at_str(ref, "name"), "c1");
        assert_str(json_at_str(ref, "uid"), json_at_str(cl, "metadata.uid"));
        assert_true(cJSON_IsTrue(json_at(ref, "controller")));
        cJSON_Delete(mc);
        cJSON_Delete(cl);
        cl = cl_wait(&KUBE_RES_CLUSTERS, "c1", pred_field, "status.phase=Provisioning");
        assert_false(cJSON_IsTrue(json_at(cl, "status.infrastructureReady")));
        cJSON_Delete(cl);

        provision_cluster("c1");
        cl = cl_wait(&KUBE_RES_CLUSTERS, "c1", pred_field, "status.infrastructureReady");
        assert_true(cJSON_IsTrue(json_at(cl, "status.initialization.infrastructureProvisioned")));
        assert_str(json_at_str(cl, "spec.controlPlaneEndpoint.host"), "demo.maas");
        assert_int_equal((int)at_num(cl, "spec.controlPlaneEndpoint.port"), 6443);
        assert_false(cJSON_IsTrue(json_at(cl, "status.controlPlaneReady")));
        cJSON_Delete(cl);
}

/* clusterctl applies a cluster's objects in any order: a MaasCluster and a
 * KubeadmControlPlane that appear only after their Cluster was reconciled (and found
 * neither), with nothing else that names the cluster (no MachineDeployment) to trigger
 * another pass, are still adopted, and the cluster comes up. */
static void test_capi_sim__objects_created_after_their_cluster_are_adopted(void **state)
{
        cJSON *cl, *x;

        (void)state;
        make_cluster_only("c5");
        cl = cl_wait(&KUBE_RES_CLUSTERS, "c5", pred_finalizer, "cluster.cluster.x-k8s.io");
        cJSON_Delete(cl);
        make_maascluster("c5");
        make_kcp("c5", 1);
        x = cl_wait(&KUBE_RES_MAASCLUSTERS, "c5", pred_label, "cluster.x-k8s.io/cluster-name=c5");
        cJSON_Delete(x);
        x = cl_wait(&CL_KCPS, "c5-cp", pred_label, "cluster.x-k8s.io/cluster-name=c5");
        cJSON_Delete(x);
        provision_cluster("c5");
        cl = cl_wait(&KUBE_RES_CLUSTERS, "c5", pred_field, "status.infrastructureReady");
        cJSON_Delete(cl);
        x = cl_wait_count(&KUBE_RES_MACHINES, SEL_CP, 1);
        cJSON_Delete(x);
}

static void check_cp_machine(const cJSON *m, const cJSON *kcp)
{
        const char *name = json_at_str(m, "metadata.name");
        const cJSON *ref = cJSON_GetArrayItem(json_at(m, "metadata.ownerReferences"), 0);
        char want[300];

        assert_int_equal(strlen(name), strlen("c2-cp-") + 5);
        assert_memory_equal(name, "c2-cp-", 6);
        for (const char *p = name + 6; *p; p++)
                assert_true(islower((unsigned char)*p) || isdigit((unsigned char)*p));
        assert_str(label(m, "cluster.x-k8s.io/cluster-name"), "c2");
        assert_non_null(label(m, SEL_CP));
        assert_str(json_at_str(ref, "kind"), "KubeadmControlPlane");
        assert_str(json_at_str(ref, "uid"), json_at_str(kcp, "metadata.uid"));
        assert_true(cJSON_IsTrue(json_at(ref, "controller")));
        assert_str(json_at_str(cJSON_GetArrayItem(json_at(m, "metadata.finalizers"), 0), ""),
                   "machine.cluster.x-k8s.io");
        assert_str(json_at_str(m, "spec.clusterName"), "c2");
        assert_str(json_at_str(m, "spec.infrastructureRef.kind"), "MaasMachine");
        assert_str(json_at_str(m, "spec.infrastructureRef.name"), name);
        snprintf(want, sizeof(want), "%s-bootstrap", name);
        assert_str(json_at_str(m, "spec.bootstrap.dataSecretName"), want);
}

static void check_maasmachine(const cJSON *m)
{
        const char *name = json_at_str(m, "metadata.name");
        cJSON *mm = cl_wait(&KUBE_RES_MAASMACHINES, name, pred_exists, NULL);
        const cJSON *ref = cJSON_GetArrayItem(json_at(mm, "metadata.ownerReferences"), 0);

        assert_str(label(mm, "cluster.x-k8s.io/cluster-name"), "c2");
        assert_non_null(label(mm, SEL_CP));
        assert_str(json_at_str(ref, "kind"), "Machine");
        assert_str(json_at_str(ref, "name"), name);
        assert_str(json_at_str(ref, "uid"), json_at_str(m, "metadata.uid"));
        assert_true(cJSON_IsTrue(json_at(ref, "controller")));
        assert_str(json_at_str(mm, "spec.image"), "u-2204-0-k-1264-0");
        assert_int_equal((int)at_num(mm, "spec.minCPU"), 4);
        assert_int_equal((int)at_num(mm, "spec.minMemory"), 8192);
        assert_str(json_at_str(mm, "spec.resourcePool"), "capi");
        cJSON_Delete(mm);
}

static void check_bootstrap_secret(const char *machine)
{
        char name[300];
        cJSON *sec;
        unsigned char *data = NULL;
        size_t len = 0;
        const char *v;

        snprintf(name, sizeof(name), "%s-bootstrap", machine);
        sec = cl_wait(&KUBE_RES_SECRETS, name, pred_exists, NULL);
        assert_str(label(sec, "cluster.x-k8s.io/cluster-name"), "c2");
        assert_str(json_at_str(sec, "type"), "cluster.x-k8s.io/secret");
        v = json_at_str(sec, "data.value");
        assert_non_null(v);
        assert_int_equal(base64_decode(v, strlen(v), &data, &len), 0);
        assert_true(len > 13 && memcmp(data, "#cloud-config\n", 14) == 0);
        free(data);
        cJSON_Delete(sec);
}

/* The <cluster>-kubeconfig Secret holds the workload kubeconfig. */
static void check_kubeconfig_secret(void)
{
        cJSON *sec = cl_wait(&KUBE_RES_SECRETS, "c2-kubeconfig", pred_exists, NULL);
        char *b64 = file_b64(CL.workload.kubeconfig);

        assert_str(json_at_str(sec, "data.value"), b64);
        assert_str(json_at_str(sec, "type"), "cluster.x-k8s.io/secret");
        assert_str(label(sec, "cluster.x-k8s.io/cluster-name"), "c2");
        free(b64);
        cJSON_Delete(sec);
}

/* The first control-plane machine: alone until it is ready; then the kubeconfig, its Node,
 * its status mirror. Returns its name. */
static char *first_control_plane(void)
{
        cJSON *l, *kcp, *m;
        char *node, *name;

        l = cl_wait_count(&KUBE_RES_MACHINES, SEL_CP, 1);
        kcp = cl_get(&CL_KCPS, "c2-cp");
        m = cJSON_Duplicate(cJSON_GetArrayItem(json_at(l, "items"), 0), true);
        cJSON_Delete(l);
        name = xstrdup(json_at_str(m, "metadata.name"));
        check_cp_machine(m, kcp);
        check_maasmachine(m);
        check_bootstrap_secret(name);
        cJSON_Delete(kcp);
        cJSON_Delete(m);
        /* kubeadm: no second control plane and no worker before the first is up */
        m = cl_wait(&KUBE_RES_MACHINES, name, pred_field, "status.phase=Provisioning");
        cJSON_Delete(m);
        assert_int_equal(cl_count(&KUBE_RES_MACHINES, NULL), 1);
        assert_null(cl_get(&KUBE_RES_SECRETS, "c2-kubeconfig"));

        node = deploy(name);
        check_kubeconfig_secret();
        /* status and spec are separate writes, in either order over two passes: wait for
         * each */
        m = cl_wait(&KUBE_RES_MACHINES, name, pred_field, "spec.providerID=maas:///az1/sys1");
        cJSON_Delete(m);
        m = cl_wait(&KUBE_RES_MACHINES, name, pred_field, "status.phase=Provisioned");
        assert_str(json_at_str(m, "spec.providerID"), "maas:///az1/sys1");
        assert_true(cJSON_IsTrue(json_at(m, "status.infrastructureReady")));
        assert_str(json_at_str(cJSON_GetArrayItem(json_at(m, "status.addresses"), 0), "address"),
                   "10.20.0.1");
        cJSON_Delete(m);
        m = cl_wait(&KUBE_RES_NODES, node, pred_exists, NULL);
        assert_str(annotation(m, "cluster.x-k8s.io/machine"), name);
        assert_str(annotation(m, "cluster.x-k8s.io/cluster-namespace"), CL.ns);
        cJSON_Delete(m);
        /* the provider writes the providerID on the Node: the Machine gets its nodeRef */
        cl_patch(&KUBE_RES_NODES, node, NULL, "{\"spec\":{\"providerID\":\"maas:///az1/sys1\"}}");
        m = cl_wait(&KUBE_RES_MACHINES, name, pred_field, "status.phase=Running");
        assert_str(json_at_str(m, "status.nodeRef.name"), node);
        assert_str(json_at_str(m, "status.nodeRef.kind"), "Node");
        cJSON_Delete(m);
        free(node);
        return name;
}

/* The other control planes and the workers follow the first; all get deployed. */
static void the_rest_follow(void)
{
        cJSON *l, *x;
        const cJSON *m;

        deploy_machines(SEL_CP, 3);
        l = cl_wait_count(&KUBE_RES_MACHINES, SEL_MD "=c2-md", 2);
        cJSON_ArrayForEach (m, json_at(l, "items")) {
                const cJSON *ref = cJSON_GetArrayItem(json_at(m, "metadata.ownerReferences"), 0);

                /* controlled by its MachineSet, <md>-<5 characters>, as CAPI's */
                assert_str(json_at_str(ref, "kind"), "MachineSet");
                assert_true(cJSON_IsTrue(json_at(ref, "controller")));
                assert_int_equal(strlen(json_at_str(ref, "name")), strlen("c2-md-") + 5);
                assert_int_equal(strncmp(json_at_str(ref, "name"), "c2-md-", 6), 0);
                assert_str(label(m, "cluster.x-k8s.io/set-name"), json_at_str(ref, "name"));
                assert_null(label(m, SEL_CP));
                x = cl_wait(&KUBE_RES_MAASMACHINES, json_at_str(m, "metadata.name"), pred_exists,
                            NULL);
                assert_int_equal((int)at_num(x, "spec.minCPU"), 2);
                assert_null(label(x, SEL_CP));
                cJSON_Delete(x);
        }
        deploy_all(l);
        cJSON_Delete(l);
        x = cl_wait(&CL_KCPS, "c2-cp", pred_field, "status.readyReplicas=3");
        assert_int_equal((int)at_num(x, "status.replicas"), 3);
        cJSON_Delete(x);
        x = cl_wait(&CL_MDS, "c2-md", pred_field, "status.readyReplicas=2");
        cJSON_Delete(x);
        assert_int_equal(nodes_of(NULL), 5);
}

/* Scale down 3 -> 1: the two newest go, with their MaasMachines, Nodes and Secrets. */
static void scale_down_keeps_oldest(const char *first)
{
        cJSON *l, *x;
        const cJSON *m;
        char gone[2][128];
        int n_gone = 0;

        l = cl_list(&KUBE_RES_MACHINES, SEL_CP);
        cJSON_ArrayForEach (m, json_at(l, "items")) {
                if (strcmp(json_at_str(m, "metadata.name"), first) != 0 && n_gone < 2)
                        snprintf(gone[n_gone++], sizeof(gone[0]), "%s",
                                 json_at_str(m, "metadata.name"));
        }
        cJSON_Delete(l);
        assert_int_equal(n_gone, 2);
        cl_patch(&CL_KCPS, "c2-cp", NULL, "{\"spec\":{\"replicas\":1}}");
        l = cl_wait_count(&KUBE_RES_MACHINES, SEL_CP, 1);
        assert_str(json_at_str(cJSON_GetArrayItem(json_at(l, "items"), 0), "metadata.name"), first);
        cJSON_Delete(l);
        for (int i = 0; i < n_gone; i++) {
                char sec[300];

                assert_null(cl_wait(&KUBE_RES_MAASMACHINES, gone[i], NULL, NULL));
                snprintf(sec, sizeof(sec), "%s-bootstrap", gone[i]);
                assert_null(cl_wait(&KUBE_RES_SECRETS, sec, NULL, NULL));
                assert_int_equal(nodes_of(gone[i]), 0);
        }
        assert_int_equal(nodes_of(first), 1);
        assert_int_equal(cl_count(&KUBE_RES_MAASMACHINES, SEL_CP), 1);
        x = cl_wait(&CL_KCPS, "c2-cp", pred_field, "status.replicas=1");
        cJSON_Delete(x);
}

static void test_capi_sim__machines_follow_replicas(void **state)
{
        cJSON *x;
        char *first;

        (void)state;
        make_cluster("c2");
        make_kcp_md("c2", 3, 2);
        x = cl_wait(&CL_KCPS, "c2-cp", pred_label, "cluster.x-k8s.io/cluster-name=c2");
        cJSON_Delete(x);
        x = cl_wait(&CL_MDS, "c2-md", pred_label, "cluster.x-k8s.io/cluster-name=c2");
        cJSON_Delete(x);
        assert_int_equal(cl_count(&KUBE_RES_MACHINES, NULL), 0); /* infrastructure not ready */

        provision_cluster("c2");
        first = first_control_plane();
        x = cl_wait(&KUBE_RES_CLUSTERS, "c2", pred_field, "status.controlPlaneReady");
        assert_true(cJSON_IsTrue(json_at(x, "status.initialization.controlPlaneInitialized")));
        cJSON_Delete(x);
        the_rest_follow();
        scale_down_keeps_oldest(first);
        free(first);
}

static void test_capi_sim__cluster_delete_removes_everything_below_it(void **state)
{
        (void)state;
        make_cluster("c3");
        make_kcp_md("c3", 1, 1);
        provision_cluster("c3");
        deploy_machines(SEL_CP, 1);
        deploy_machines(SEL_MD, 1);
        for (unsigned t = 0; t < CLUSTERS_WAIT_MS && nodes_of(NULL) < 2; t += 25)
                cl_sleep_ms(25);
        assert_int_equal(nodes_of(NULL), 2);
        assert_int_equal(kube_delete(CL.kube, &KUBE_RES_CLUSTERS, CL.ns, "c3", NULL, NULL), 0);
        assert_null(cl_wait(&KUBE_RES_CLUSTERS, "c3", NULL, NULL));
        assert_int_equal(cl_count(&KUBE_RES_MACHINES, NULL), 0);
        assert_int_equal(cl_count(&KUBE_RES_MAASMACHINES, NULL), 0);
        assert_int_equal(cl_count(&CL_KCPS, NULL), 0);
        assert_int_equal(cl_count(&CL_MDS, NULL), 0);
        assert_null(cl_get(&KUBE_RES_MAASCLUSTERS, "c3"));
        assert_int_equal(nodes_of(NULL), 0);
}

/* Objects applied before their Cluster, then a crash of capi-sim: the restarted one rebuilds
 * its view from the informers and neither duplicates nor loses Machines. */
static void test_capi_sim__restart_keeps_replica_counts(void **state)
{
        cJSON *x;

        (void)state;
        make_kcp_md("c4", 1, 2);
        make_cluster("c4");
        provision_cluster("c4");
        deploy_machines(SEL_CP, 1);
        deploy_machines(SEL_MD, 2);
        x = cl_wait(&CL_MDS, "c4-md", pred_field, "status.readyReplicas=2");
        cJSON_Delete(x);

        simproc_kill(&capi);
        start_capi_sim();
        cl_patch(&CL_MDS, "c4-md", NULL, "{\"spec\":{\"replicas\":3}}");
        deploy_machines(SEL_MD, 3);
        x = cl_wait(&CL_MDS, "c4-md", pred_field, "status.readyReplicas=3");
        assert_int_equal((int)at_num(x, "status.replicas"), 3);
        cJSON_Delete(x);
        assert_int_equal(cl_count(&KUBE_RES_MACHINES, NULL), 4);
        assert_int_equal(cl_count(&KUBE_RES_MAASMACHINES, NULL), 4);
        assert_int_equal(nodes_of(NULL), 4);
}

/* As CAPI's controllers, capi-sim leaves a paused Cluster alone (clusterctl move pauses the
 * source and creates the target's copies paused): no owner reference on its MaasCluster, no
 * Machine for its KCP or MachineDeployment; unpaused, both follow. */
static void test_capi_sim__paused_cluster_is_left_alone(void **state)
{
        cJSON *mc;

        (void)state;
        cl_create(
                &KUBE_RES_CLUSTERS,
                test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":\"Cluster\","
                          "\"metadata\":{\"name\":\"c6\"},\"spec\":{\"paused\":true,"
                          "\"controlPlaneRef\":{\"apiVersion\":\"controlplane.cluster.x-k8s.io/"
                          "v1beta1\",\"kind\":\"KubeadmControlPlane\",\"name\":\"c6-cp\"},"
                          "\"infrastructureRef\":{\"apiVersion\":\"infrastructure.cluster.x-k8s.io/"
                          "v1beta1\",\"kind\":\"MaasCluster\",\"name\":\"c6\"}}}"));
        make_maascluster("c6");
        make_kcp_md("c6", 1, 2);
        provision_cluster("c6");
        cl_sleep_ms(1000); /* a negative check: capi-sim had a second to act, and must not */
        assert_int_equal(cl_count(&KUBE_RES_MACHINES, NULL), 0);
        assert_int_equal(cl_count(&KUBE_RES_MAASMACHINES, NULL), 0);
        mc = cl_get(&KUBE_RES_MAASCLUSTERS, "c6");
        assert_null(json_at(mc, "metadata.ownerReferences"));
        cJSON_Delete(mc);
        cl_patch(&KUBE_RES_CLUSTERS, "c6", NULL, "{\"spec\":{\"paused\":false}}");
        /* the first control plane (kubeadm's rule: the workers wait for it) */
        cJSON_Delete(cl_wait_count(&KUBE_RES_MACHINES, SEL_CP, 1));
        mc = cl_wait(&KUBE_RES_MAASCLUSTERS, "c6", pred_label, "cluster.x-k8s.io/cluster-name=c6");
        assert_non_null(json_at(mc, "metadata.ownerReferences"));
        cJSON_Delete(mc);
}

/* --- MachineHealthCheck (issue 25) ------------------------------------------------------------ */

static const struct kube_resource MHCS = { "cluster.x-k8s.io", "v1beta1", "machinehealthchecks",
                                           "MachineHealthCheck", true };

static void make_mhc(const char *cluster, const char *max_unhealthy)
{
        cl_create(&MHCS,
                  test_json("{\"apiVersion\":\"cluster.x-k8s.io/v1beta1\",\"kind\":"
                            "\"MachineHealthCheck\",\"metadata\":{\"name\":\"%s-md\"},\"spec\":{"
                            "\"clusterName\":\"%s\",\"selector\":{\"matchLabels\":{"
                            "\"" SEL_MD "\":\"%s-md\"}},\"maxUnhealthy\":%s,"
                            "\"unhealthyConditions\":[{\"type\":\"Ready\",\"status\":"
                            "\"Unknown\",\"timeout\":\"1s\"}]}}",
                            cluster, cluster, cluster, max_unhealthy));
}

/* As capmaas: the Node of MaasMachine name gets its providerID, so capi-sim's Machine
 * gets its nodeRef (what a MachineHealthCheck reads the Node by). */
static void node_gets_provider_id(const char *name)
{
        cJSON *mm = cl_get(&KUBE_RES_MAASMACHINES, name), *m;
        char want[160];
        char *node = xstrdup(json_at_str(mm, "status.hostname"));
        char *body =
                xasprintf("{\"spec\":{\"providerID\":\"%s\"}}", json_at_str(mm, "spec.providerID"));

        for (char *p = node; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        cl_patch(&KUBE_RES_NODES, node, NULL, body);
        (void)snprintf(want, sizeof(want), "status.nodeRef.name=%s", node);
        m = cl_wait(&KUBE_RES_MACHINES, name, pred_field, want);
        cJSON_Delete(m);
        free(body);
        free(node);
        cJSON_Delete(mm);
}

/* A cluster with one control plane and two deployed workers; the workers' names (in w). */
static void two_workers(const char *cluster, char *w[2])
{
        cJSON *l;

        make_cluster(cluster);
        make_kcp_md(cluster, 1, 2);
        provision_cluster(cluster);
        deploy_machines(SEL_CP, 1);
        deploy_machines(SEL_MD, 2);
        for (unsigned t = 0; t < CLUSTERS_WAIT_MS && nodes_of(NULL) < 3; t += 25)
                cl_sleep_ms(25);
        assert_int_equal(nodes_of(NULL), 3);
        l = cl_list(&KUBE_RES_MACHINES, SEL_MD);
        w[0] = xstrdup(json_at_str(cJSON_GetArrayItem(json_at(l, "items"), 0), "metadata.name"));
        w[1] = xstrdup(json_at_str(cJSON_GetArrayItem(json_at(l, "items"), 1), "metadata.name"));
        cJSON_Delete(l);
        for (size_t i = 0; i < 2; i++)
                node_gets_provider_id(w[i]);
}

/* MachineDeployment md has n Machines again, none of them named gone, all ready. */
static void replaced(const char *md, const char *gone, int n)
{
        char want[32];

        cJSON *l;
        const cJSON *m;

        assert_null(cl_wait(&KUBE_RES_MACHINES, gone, NULL, NULL));
        l = cl_wait_count(&KUBE_RES_MACHINES, SEL_MD, n);
        deploy_all(l);
        cJSON_ArrayForEach (m, json_at(l, "items"))
                assert_string_not_equal(json_at_str(m, "metadata.name"), gone);
        cJSON_Delete(l);
        (void)snprintf(want, sizeof(want), "status.readyReplicas=%d", n);
        cJSON_Delete(cl_wait(&CL_MDS, md, pred_field, want));
}

/* CAPI 1.10: an infrastructure machine's failureReason reaches the Machine (phase Failed),
 * which the MachineHealthCheck remediates at once; the MachineDeployment replaces it. */
static void test_capi_sim__failed_infrastructure_machine_is_replaced(void **state)
{
        char *w[2];
        cJSON *m;

        (void)state;
        two_workers("c5", w);
        cl_patch(&KUBE_RES_MAASMACHINES, w[0], "status",
                 "{\"status\":{\"ready\":false,\"failureReason\":\"UpdateError\","
                 "\"failureMessage\":\"MAAS machine sys1 (h) no longer exists in MAAS\"}}");
        m = cl_wait(&KUBE_RES_MACHINES, w[0], pred_field, "status.phase=Failed");
        assert_string_equal(json_at_str(m, "status.failureReason"), "UpdateError");
        assert_non_null(strstr(json_at_str(m, "status.failureMessage"), "no longer exists"));
        cJSON_Delete(m);
        make_mhc("c5", "\"50%\""); /* of 2: 1 (CAPI rounds down) */
        replaced("c5-md", w[0], 2);
        free(w[0]);
        free(w[1]);
}

static bool pred_node_unknown(const cJSON *o, const void *arg)
{
        (void)arg;
        return cl_cond_is(o, "Ready", "Unknown", "NodeStatusUnknown");
}

/* A Node whose kubelet stopped posting (its MaasMachine no longer ready) is remediated after
 * the check's timeout, unless more are unhealthy than maxUnhealthy allows. */
static void test_capi_sim__unready_node_is_replaced_within_max_unhealthy(void **state)
{
        char *w[2], *node;
        cJSON *mm, *m;

        (void)state;
        two_workers("c7", w);
        make_mhc("c7", "0");
        mm = cl_get(&KUBE_RES_MAASMACHINES, w[0]);
        node = xstrdup(json_at_str(mm, "status.hostname"));
        for (char *p = node; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        cJSON_Delete(mm);
        cl_patch(&KUBE_RES_MAASMACHINES, w[0], "status", "{\"status\":{\"ready\":false}}");
        cJSON_Delete(cl_wait(&KUBE_RES_NODES, node, pred_node_unknown, NULL));
        /* maxUnhealthy 0: one unhealthy of two is already too many, nothing is marked */
        cJSON_Delete(cl_wait(&MHCS, "c7-md", pred_field, "status.currentHealthy=1"));
        m = cl_get(&KUBE_RES_MACHINES, w[0]);
        assert_non_null(m);
        assert_null(cl_condition(m, "OwnerRemediated"));
        cJSON_Delete(m);
        cl_patch(&MHCS, "c7-md", NULL, "{\"spec\":{\"maxUnhealthy\":1}}");
        replaced("c7-md", w[0], 2);
        free(node);
        free(w[0]);
        free(w[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_capi_sim__serves_healthz_once_synced),
                cmocka_unit_test_setup(test_capi_sim__cluster_owns_maascluster_and_mirrors_it,
                                       setup),
                cmocka_unit_test_setup(test_capi_sim__machines_follow_replicas, setup),
                cmocka_unit_test_setup(test_capi_sim__cluster_delete_removes_everything_below_it,
                                       setup),
                cmocka_unit_test_setup(test_capi_sim__restart_keeps_replica_counts, setup),
                cmocka_unit_test_setup(
                        test_capi_sim__objects_created_after_their_cluster_are_adopted, setup),
                cmocka_unit_test_setup(test_capi_sim__paused_cluster_is_left_alone, setup),
                cmocka_unit_test_setup(test_capi_sim__failed_infrastructure_machine_is_replaced,
                                       setup),
                cmocka_unit_test_setup(test_capi_sim__unready_node_is_replaced_within_max_unhealthy,
                                       setup),
        };

        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
