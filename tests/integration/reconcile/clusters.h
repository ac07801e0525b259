#pragma once
/*
 * clusters: the two Kubernetes APIs the reconcile-layer tests run against, each a kube-sim:
 * the management cluster (every CRD installed and established) and the workload cluster
 * (Nodes), with a client for each and a fresh namespace per test. The helpers work in that
 * namespace and route Nodes to the workload API, everything else to the management API.
 *
 * One per test process (CL); set up by the group setup, torn down by the group teardown.
 * Every helper fails the running cmocka test instead of returning an error; waits poll
 * every 25 ms up to CLUSTERS_WAIT_MS. Single-threaded.
 */

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "kube_client.h"
#include "kubesim.h"

#define CLUSTERS_WAIT_MS 20000
#define OR(a, b)         ((a) ? (a) : (b))
/* cmocka's assert_string_equal crashes on NULL: fail cleanly instead */
#define assert_str(a, b)                      \
        do {                                  \
                const char *a_ = (a);         \
                assert_non_null(a_);          \
                assert_string_equal(a_, (b)); \
        } while (0)

struct clusters {
        struct kubesim mgmt, workload;
        struct kube_client *kube, *wl; /* clients of mgmt and workload */
        char ns[32];                   /* the running test's namespace */
};

extern struct clusters CL;
extern const struct kube_resource CL_KCPS; /* KubeadmControlPlanes */
extern const struct kube_resource CL_MDS;  /* MachineDeployments */

/* Starts both kube-sims and their clients, installs the CRDs and waits until the newest
 * kinds answer a LIST. 0 or -1 (for a group setup). */
int clusters_setup(void);
void clusters_teardown(void);
/* Creates the namespace "t<N>" (N counts up) and makes it CL.ns. */
void clusters_new_namespace(void);

/* The object r/name in CL.ns (NULL when it is not there). */
cJSON *cl_get(const struct kube_resource *r, const char *name);
typedef bool cl_pred(const cJSON *o, const void *arg);
/* Polls r/name until pred holds and returns it, or, with pred NULL, until it is gone (NULL). */
cJSON *cl_wait(const struct kube_resource *r, const char *name, cl_pred *pred, const void *arg);
/* Creates obj (consumed) in CL.ns. */
void cl_create(const struct kube_resource *r, cJSON *obj);
/* A merge patch of r/name (sub: "status" or NULL). */
void cl_patch(const struct kube_resource *r, const char *name, const char *sub, const char *body);
void cl_delete(const struct kube_resource *r, const char *name);
/* The list of r in CL.ns matching the label selector (NULL = all). */
cJSON *cl_list(const struct kube_resource *r, const char *selector);
int cl_count(const struct kube_resource *r, const char *selector);
/* Waits until exactly n objects match; returns the list. */
cJSON *cl_wait_count(const struct kube_resource *r, const char *selector, int n);
/* Polls fn(arg) until it holds; false if it never did within CLUSTERS_WAIT_MS. */
bool cl_eventually(bool (*fn)(const void *arg), const void *arg);

/* The condition of this type in o's status.conditions, or NULL. */
const cJSON *cl_condition(const cJSON *o, const char *type);
/* Condition type has this status (and this reason unless reason is NULL). */
bool cl_cond_is(const cJSON *o, const char *type, const char *status, const char *reason);
void cl_sleep_ms(unsigned ms);
