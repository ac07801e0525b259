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
 */

#include <stddef.h>

#include "compiler.h"

struct maas_inventory;
struct router;
struct webhooks;

struct webhook_endpoint {
        const char *path;   /* URL path */
        const char *name;   /* webhook name in the configuration objects */
        const char *kind;   /* "MaasMachine", … */
        const char *plural; /* "maasmachines", … */
        int mutating;       /* 1 for /mutate-…, 0 for /validate-… */
};

/* The eight endpoints, in manifest order. */
extern const struct webhook_endpoint webhook_endpoints[];
extern const size_t webhook_endpoints_n;

/* Adds a POST route for every endpoint to r. */
MUST_CHECK int webhooks_register(struct router *r);

/* Route data for the endpoints with MAAS checks against inv (borrowed; NULL = none). The
 * struct must outlive the router it is registered with. */
MUST_CHECK int webhooks_new(struct maas_inventory *inv, struct webhooks **ret);
struct webhooks *webhooks_free(struct webhooks *w);
/* Adds a POST route for every endpoint to r, bound to w. */
MUST_CHECK int webhooks_register_with(struct webhooks *w, struct router *r);
