/*
 * clusters: the management and workload kube-sims of the reconcile-layer tests (see
 * clusters.h).
 */
#include "clusters.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "json.h"
#include "testutil.h"

#define POLL_MS 25

struct clusters CL;
const struct kube_resource CL_KCPS = { "controlplane.cluster.x-k8s.io", "v1beta1",
                                       "kubeadmcontrolplanes", "KubeadmControlPlane", true };
const struct kube_resource CL_MDS = { "cluster.x-k8s.io", "v1beta1", "machinedeployments",
                                      "MachineDeployment", true };
static unsigned ns_seq;

void cl_sleep_ms(unsigned ms)
{
        usleep(ms * 1000u);
}

static struct kube_client *client_for(const struct kube_resource *r)
{
        return r == &KUBE_RES_NODES ? CL.wl : CL.kube;
}

static bool crds_established(const void *arg)
{
        cJSON *a = NULL, *b = NULL;
        bool ok;

        (void)arg;
        ok = kube_list(CL.kube, &CL_MDS, NULL, NULL, &a, NULL) == 0 &&
             kube_list(CL.kube, &CL_KCPS, NULL, NULL, &b, NULL) == 0;
        cJSON_Delete(a);
        cJSON_Delete(b);
        return ok;
}

int clusters_setup(void)
{
        memset(&CL, 0, sizeof(CL));
        if (kubesim_start(&CL.mgmt, NULL) < 0)
                return -1;
        if (kubesim_start(&CL.workload, NULL) < 0) {
                kubesim_stop(&CL.mgmt);
                return -1;
        }
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &CL.mgmt.cfg }, &CL.kube), 0);
        assert_int_equal(
                kube_client_new(&(struct kube_client_opts){ .config = &CL.workload.cfg }, &CL.wl),
                0);
        kubesim_install_crds(CL.kube);
        if (!cl_eventually(crds_established, NULL)) {
                fprintf(stderr, "clusters: CRDs not established\n");
                return -1;
        }
        return 0;
}

void clusters_teardown(void)
{
        kube_client_free(CL.kube);
        kube_client_free(CL.wl);
        kubesim_stop(&CL.mgmt);
        kubesim_stop(&CL.workload);
}

void clusters_new_namespace(void)
{
        (void)snprintf(CL.ns, sizeof(CL.ns), "t%u", ++ns_seq);
        kubesim_create_namespace(CL.kube, CL.ns);
}

cJSON *cl_get(const struct kube_resource *r, const char *name)
{
        cJSON *o = NULL;

        if (kube_get(client_for(r), r, CL.ns, name, &o, NULL) != 0)
                return NULL;
        return o;
}

cJSON *cl_wait(const struct kube_resource *r, const char *name, cl_pred *pred, const void *arg)
{
        for (unsigned t = 0; t < CLUSTERS_WAIT_MS; t += POLL_MS) {
                cJSON *o = cl_get(r, name);

                if (!pred && !o)
                        return NULL;
                if (pred && o && pred(o, arg))
                        return o;
                cJSON_Delete(o);
                cl_sleep_ms(POLL_MS);
        }
        fail_msg("timed out waiting for %s %s/%s", r->kind, CL.ns, name);
        return NULL;
}

bool cl_eventually(bool (*fn)(const void *arg), const void *arg)
{
        for (unsigned t = 0; t < CLUSTERS_WAIT_MS; t += POLL_MS) {
                if (fn(arg))
                        return true;
                cl_sleep_ms(POLL_MS);
        }
        return fn(arg);
}

void cl_create(const struct kube_resource *r, cJSON *obj)
{
        struct kube_error e = { 0 };
        int err = kube_create(client_for(r), r, CL.ns, obj, NULL, &e);

        if (err)
                fail_msg("create %s: %s %s", r->kind, cm_strerror(err), OR(e.message, ""));
        kube_error_release(&e);
        cJSON_Delete(obj);
}

void cl_patch(const struct kube_resource *r, const char *name, const char *sub, const char *body)
{
        struct kube_error e = { 0 };
        int err = kube_patch(client_for(r),
                             &(struct kube_patch_opts){ .resource = r,
                                                        .ns = CL.ns,
                                                        .name = name,
                                                        .subresource = sub,
                                                        .type = KUBE_PATCH_MERGE,
                                                        .body = body },
                             NULL, &e);

        if (err)
                fail_msg("patch %s %s: %s %s", r->kind, name, cm_strerror(err), OR(e.message, ""));
        kube_error_release(&e);
}

void cl_delete(const struct kube_resource *r, const char *name)
{
        assert_int_equal(kube_delete(client_for(r), r, CL.ns, name, NULL, NULL), 0);
}

cJSON *cl_list(const struct kube_resource *r, const char *selector)
{
        cJSON *l = NULL;

        assert_int_equal(kube_list(client_for(r), r, CL.ns,
                                   &(struct kube_list_opts){ .label_selector = selector }, &l,
                                   NULL),
                         0);
        return l;
}

int cl_count(const struct kube_resource *r, const char *selector)
{
        cJSON *l = cl_list(r, selector);
        int n = cJSON_GetArraySize(json_at(l, "items"));

        cJSON_Delete(l);
        return n;
}

cJSON *cl_wait_count(const struct kube_resource *r, const char *selector, int n)
{
        int have = -1;

        for (unsigned t = 0; t < CLUSTERS_WAIT_MS; t += POLL_MS) {
                cJSON *l = cl_list(r, selector);

                have = cJSON_GetArraySize(json_at(l, "items"));
                if (have == n)
                        return l;
                cJSON_Delete(l);
                cl_sleep_ms(POLL_MS);
        }
        fail_msg("timed out waiting for %d %s (%s), have %d", n, r->kind, OR(selector, "all"),
                 have);
        return NULL;
}

const cJSON *cl_condition(const cJSON *o, const char *type)
{
        const cJSON *c;

        cJSON_ArrayForEach (c, json_at(o, "status.conditions")) {
                const char *t = json_at_str(c, "type");

                if (t && strcmp(t, type) == 0)
                        return c;
        }
        return NULL;
}

bool cl_cond_is(const cJSON *o, const char *type, const char *status, const char *reason)
{
        const cJSON *c = cl_condition(o, type);

        return c && strcmp(OR(json_at_str(c, "status"), ""), status) == 0 &&
               (!reason || strcmp(OR(json_at_str(c, "reason"), ""), reason) == 0);
}
