#pragma once
/*
 * webhooks: the admission endpoints for the Maas kinds (defaulting and validation), routed
 * under the paths and names of the reference provider:
 *   /mutate-infrastructure-cluster-x-k8s-io-v1beta1-<kind>    m<kind>.kb.io
 *   /validate-infrastructure-cluster-x-k8s-io-v1beta1-<kind>  v<kind>.kb.io
 * for maascluster, maasmachine, maasmachinetemplate and maasclustertemplate.
 *
 * Handlers are pure functions of the AdmissionReview they receive: they never block on the
 * network and may run on any server thread at once.
 */

#include <stddef.h>

#include "compiler.h"

struct router;

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
