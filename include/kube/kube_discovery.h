#pragma once
/*
 * kube_discovery: which versions of an API group the server serves (GET /apis/<group>,
 * the APIGroup document of kubernetes.md §1.2), for clients that read another project's
 * kinds in whichever version the cluster has (Cluster API v1beta2 or v1beta1).
 *
 * One call, on the caller's client and thread; no retries (the caller decides how to wait:
 * a discovery answer is worth waiting for, never guessing). The result is owned by the
 * caller.
 */

#include <stdbool.h>
#include <stddef.h>

#include "compiler.h"
#include "kube_client.h"

#define KUBE_GROUP_VERSIONS_MAX 16

struct kube_group_versions {
        char *preferred;                         /* preferredVersion.version, or NULL */
        char *versions[KUBE_GROUP_VERSIONS_MAX]; /* served, in the server's order */
        size_t n;
};

/* GET /apis/<group>. 0 with *ret filled; CM_ENOTFOUND when the group is not served (404);
 * CM_EPARSE when the document has no versions; the kube_client errors otherwise (e filled
 * when non-NULL). */
MUST_CHECK int kube_discover_group(struct kube_client *c,
                                   const char *group,
                                   struct kube_group_versions *ret,
                                   struct kube_error *e);
/* Whether version is among g's served versions. */
bool kube_group_serves(const struct kube_group_versions *g, const char *version);
/* The first of want[0..n) that g serves (want in the caller's order of preference), or
 * NULL. */
const char *kube_group_pick(const struct kube_group_versions *g, const char *const *want, size_t n);
void kube_group_versions_release(struct kube_group_versions *g);
