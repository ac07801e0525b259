#pragma once
/*
 * webhooks: the admission endpoints for the Maas kinds (defaulting and validation), routed
 * under the paths and names of the reference provider:
 *   /mutate-infrastructure-cluster-x-k8s-io-v1beta1-<kind>    m<kind>.kb.io
 *   /validate-infrastructure-cluster-x-k8s-io-v1beta1-<kind>  v<kind>.kb.io
 * for maascluster, maasmachine, maasmachinetemplate and maasclustertemplate.
 *
 * Handlers may run on any server thread at once. Without a MAAS inventory they are pure
 * functions of the AdmissionReview. With one (webhooks_new), the validating endpoints also
 * check the object against MAAS (beyond.md B1) from the inventory's cached snapshot; the
 * only wait is the inventory's bounded refresh (at most 2 s, at most once per 10 s) when a
 * name is missing from the cache, and when the inventory is unusable the object is allowed
 * with a warning.
 *
 * Memory: a review is scanned (admission_request_scan: strict JSON within per-request
 * budgets) before any tree is built, and the tree it will build is counted against a decode
 * budget shared by every thread (bytes of trees being built at once). A review that does
 * not fit waits up to decode_wait_ms for others to finish, then gets 429 with Retry-After.
 * After a large review the freed heap is given back to the system.
 */

#include <stddef.h>

#include "compiler.h"

struct maas_inventory;
struct metrics;
struct router;
struct webhooks;

struct webhook_endpoint {
        const char *path;   /* URL path */
        const char *name;   /* webhook name in the configuration objects */
        const char *kind;   /* "MaasMachine", … */
        const char *plural; /* "maasmachines", … */
        int mutating;       /* 1 for /mutate-…, 0 for /validate-… */
};

/* The twelve endpoints, in manifest order. */
extern const struct webhook_endpoint webhook_endpoints[];
extern const size_t webhook_endpoints_n;

/* Adds a POST route for every endpoint to r. */
MUST_CHECK int webhooks_register(struct router *r);

/* The decode budget and how long a review waits for it. 16 MiB holds the largest tree a
 * review within the budgets builds (ADMISSION_VALUES_MAX values and a 4 MiB body). */
#define WEBHOOKS_DECODE_BUDGET_DEFAULT  (16u << 20)
#define WEBHOOKS_DECODE_WAIT_MS_DEFAULT 100u
/* Requests at least this large (body or tree) give freed memory back when they end
 * (malloc_trim); blocks this large are mapped by malloc (webhooks_new sets glibc's
 * M_MMAP_THRESHOLD, process-wide) so they go back the moment they are freed. */
#define WEBHOOKS_TRIM_BYTES             (1u << 20)

/*
 * Per-cluster MAAS (MaasCluster spec.identityRef, docs/credentials.md): the inventory of the
 * MAAS the cluster an object names (its cluster.x-k8s.io/cluster-name label, in the request's
 * namespace) uses. acquire: 0 and *ret, a reference to that MAAS's inventory (release it), or
 * NULL when the cluster uses the process-wide MAAS (opts.inv); or a negative code and
 * *ret_why (malloc'd, no key in it) when its MAAS cannot be known now: the MAAS checks are
 * then skipped with a warning saying why. Called on server threads, concurrently.
 */
struct webhooks_inventory_source {
        int (*acquire)(void *ud,
                       const char *ns,
                       const char *cluster,
                       struct maas_inventory **ret,
                       char **ret_why);
        void (*release)(void *ud, struct maas_inventory *inv);
        void *ud;
};

struct webhooks_opts {
        struct maas_inventory *inv; /* borrowed; NULL = no MAAS checks */
        /* borrowed; NULL (or no acquire) = every object is checked against inv */
        const struct webhooks_inventory_source *source;
        size_t decode_budget;    /* bytes; 0 = WEBHOOKS_DECODE_BUDGET_DEFAULT */
        unsigned decode_wait_ms; /* 0 = WEBHOOKS_DECODE_WAIT_MS_DEFAULT */
        /* borrowed, outlives every request; NULL = none. Gets
         * capmaas_webhook_decode_refused_total: reviews answered 429 for the budget. */
        struct metrics *metrics;
};

/* Route data for the endpoints with MAAS checks against inv (borrowed; NULL = none). The
 * struct must outlive the router it is registered with. webhooks_new uses the defaults. */
MUST_CHECK int webhooks_new(struct maas_inventory *inv, struct webhooks **ret);
MUST_CHECK int webhooks_new_opts(const struct webhooks_opts *opts, struct webhooks **ret);
struct webhooks *webhooks_free(struct webhooks *w);
/* Adds a POST route for every endpoint to r, bound to w. */
MUST_CHECK int webhooks_register_with(struct webhooks *w, struct router *r);

/* w's decode budget, as requests take it (for tests: hold it to see a review refused, or
 * queued). take: CM_OK or CM_ETIMEDOUT after the wait. Any thread. */
MUST_CHECK int webhooks_budget_take(struct webhooks *w, size_t bytes);
void webhooks_budget_give(struct webhooks *w, size_t bytes);
/* Requests waiting for the budget now, and refused since w was made. */
unsigned webhooks_budget_waiters(struct webhooks *w);
unsigned long webhooks_budget_refused(struct webhooks *w);
