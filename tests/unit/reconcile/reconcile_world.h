#pragma once
/*
 * reconcile_world: what the reconciler unit tests run the real reconcilers in (a fixture
 * linked into every tests/unit/reconcile/test_*.c).
 *
 *   - a fake MAAS: a struct http_transport behind the real maas_client. It answers from
 *     routes (method + the end of the URL -> status, body, Retry-After, or a transport
 *     error), the newest route first, and records every request with its form body
 *     URL-decoded ("op=deploy&user_data=...").
 *   - a fake Kubernetes API: a struct http_transport behind the real kube_client (the
 *     management cluster and the workload clusters, told apart by host). It holds objects
 *     by URL, answers GET from them, applies merge PATCHes (bumping resourceVersion;
 *     an object being deleted whose last finalizer goes is removed, as the API server does)
 *     and records every request.
 *   - Cluster API objects in either served version: the fake API's discovery document
 *     (GET /apis/cluster.x-k8s.io) serves only world_capi, the provider discovers it in
 *     world_new, and world_cluster / world_machine write Cluster and Machine in that
 *     version's shape, with the other version's fields holding the opposite value, so a
 *     reader of the wrong shape fails. world_run_rows runs every row in both versions.
 *   - a provider with its informers created but not started (provider_internal.h), and
 *     one worker (worker.h) whose clients use the two fakes; MAAS retry waits are recorded,
 *     never slept. Objects reach the informers through informer_feed_event
 *     (kube/informer_priv.h); world_sync() re-feeds what the fake API holds after a pass,
 *     as a watch would.
 *
 * Single-threaded: everything runs on the test's thread, on a fake clock.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../kube/informer_priv.h"
#include "../../../reconcile/provider_internal.h"
#include "../../../reconcile/reconciler.h"
#include "../../../reconcile/worker.h"
#include "base64.h"
#include "clock.h"
#include "err.h"
#include "json.h"
#include "patch_helper.h"
#include "testutil.h"
#include "xalloc.h"

#define MGMT      "https://mgmt.test"
#define WORKLOAD  "https://workload.test:6443"
#define MAAS_URL  "http://maas.test:5240/MAAS"
#define NS        "ns1"
#define INFRA_API MGMT "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/" NS
/* The fake store's key for Cluster API objects (the reconcilers read them from the
 * informers, never by URL, so one key serves both versions). */
#define CAPI_API  MGMT "/apis/cluster.x-k8s.io/namespaces/" NS
#define CORE_API  MGMT "/api/v1/namespaces/" NS
#define WALL_S    1700000000

struct fake_request {
        char *method;
        char *path; /* MAAS: after "api/2.0/"; Kubernetes: the whole URL */
        char *body; /* MAAS: URL-decoded form; Kubernetes: the JSON sent */
};

struct fake_route {
        char *method, *url_part;
        long status;
        char *body;
        long retry_after_s; /* -1 = none */
        int fail;           /* a transport error (CM_ETIMEDOUT) instead of an answer */
        unsigned times;     /* answers this many requests, then steps aside; 0 = all */
        unsigned hits;
};

struct fake_object {
        char *url;
        cJSON *obj;
        struct informer *inf; /* the informer that watches it, or NULL */
        bool gone;            /* deleted; world_sync tells the informer once */
};

struct fake_http {
        struct http_transport t;
        bool maas; /* routes + form bodies; else the object store */
        struct fake_route routes[64];
        size_t n_routes;
        struct fake_request reqs[256];
        size_t n_reqs;
        struct fake_object objs[32];
        size_t n_objs;
        unsigned rv;
        const char *refuse; /* URLs starting with this get 401 (no retry, no sleep) */
        const char *forbid; /* URLs starting with this get 403 */
};

struct world {
        struct clock_fake clock;
        struct kube_config kube_cfg;
        struct maas_config maas_cfg;
        struct provider *p;
        struct reconciler_worker *w;
        struct fake_http maas, kube;
        uint64_t slept_ms[16];
        size_t n_sleeps;
        struct reconcile_result res;
        int rc;
};

/* The Cluster API version the fake management cluster serves: CAPI_V1BETA2 (the default)
 * or CAPI_V1BETA1; world_run_rows sets it for each run of the rows. */
extern const char *world_capi;

/* A Cluster ns1/c1 (uid-c1) owning MaasCluster c1, in world_capi's shape. */
struct world_cluster {
        bool paused, not_provisioned, control_plane_initialized;
        const char *endpoint_host; /* spec.controlPlaneEndpoint.host (port 6443), or NULL */
        int api_port;              /* spec.clusterNetwork.apiServerPort; 0 = none */
};

cJSON *world_cluster(const struct world_cluster *c);

/* A Machine ns1/<name> of cluster c1 (uid-machine) whose infrastructure is MaasMachine
 * <name>, in world_capi's shape. */
struct world_machine {
        const char *name;
        bool control_plane;         /* the cluster.x-k8s.io/control-plane label */
        const char *data_secret;    /* spec.bootstrap.dataSecretName, or NULL */
        const char *failure_domain; /* spec.failureDomain, or NULL */
        const char *node;           /* status.nodeRef.name, or NULL */
};

cJSON *world_machine(const struct world_machine *m);

/* Adds a MAAS answer (newest first). body is printf-style. */
struct fake_route *maas_route(struct fake_http *f,
                              const char *method,
                              const char *url_part,
                              long status,
                              const char *fmt,
                              ...) PRINTF_LIKE(5, 6);

/* How many requests were method + a path containing part (and a body containing
 * body_part when not NULL). */
size_t requests(const struct fake_http *f,
                const char *method,
                const char *part,
                const char *body_part);

/* Index of the first such request at or after from, or -1. */
long request_at(const struct fake_http *f, size_t from, const char *method, const char *part);

/* Writes (PATCH, PUT, POST, DELETE) made so far. */
size_t writes(const struct fake_http *f);

void dump_requests(const char *name, const struct fake_http *f);

struct provider_settings world_settings(void);

struct world *world_new(const struct provider_settings *s);

void world_free(struct world *w);

/* Puts obj (consumed) into the fake API at url, and into inf's cache when inf is set. */
void world_put(struct world *w, struct informer *inf, const char *url, cJSON *obj);

/* The object the fake API holds at url (borrowed), or NULL when deleted / absent. */
const cJSON *world_get(struct world *w, const char *url);

/* What a watch would deliver after a pass: every object into its informer. */
void world_sync(struct world *w);

/* Removes the object at url (as a user's delete of an object without finalizers). */
void world_delete(struct world *w, const char *url);

/* The condition type's member (status, reason, message) on the stored object, or NULL. */
const char *condition(const cJSON *obj, const char *type, const char *member);

bool has_finalizer(const cJSON *obj, const char *finalizer);

/* The workload cluster's <cluster>-kubeconfig Secret, pointing at WORKLOAD. */
void world_put_kubeconfig(struct world *w, const char *cluster);

/* Ends a row's test: dumps the recorded requests when RECONCILE_TEST_DUMP is set, runs
 * check(w) and frees the world. */
void world_finish(struct world *w, void (*check)(struct world *w));
/* Runs one cmocka test per row, once with world_capi = v1beta2 and once with v1beta1: test
 * i calls run with *state = the i-th row, and is named by the row's first member (a
 * const char *). Returns the number of failures (cmocka's result) of both runs. */
int world_run_rows(const void *rows, size_t n, size_t row_size, void (*run)(void **state));
