#pragma once
/*
 * legacy: objects in the shapes the reference provider wrote (v0.7, v0.8: MaasCluster
 * status.failureDomains as a map, CAPI v1beta1 conditions with severity and no reason, no
 * status.initialization) are migrated on their first pass, before anything else: the
 * schema codec reads them into the current structs (schema.h), and the status it writes
 * back replaces the stored one through /status. That write is what lets every later
 * update pass an API server that validates the whole object against the current CRD
 * without ratcheting (Kubernetes before 1.30, kube-sim): the finalizer removal of a
 * deleting object, a paused or orphaned object's metadata change. An object already in the
 * current shape reads and writes back identically, so it costs no write.
 *
 * Runs on the pass's worker thread with its clients; no state.
 */

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "compiler.h"

struct kube_resource;
struct reconciler_worker;

/* *cur is the object as this pass read it, encoded the pass's decoded value encoded again
 * (consumed). When their statuses differ, writes encoded's status (one PATCH on /status,
 * metadata and spec untouched) and *cur becomes the migrated object; otherwise nothing.
 * Errors as reconciler_write. */
MUST_CHECK int legacy_migrate_status(struct reconciler_worker *w,
                                     const struct kube_resource *r,
                                     cJSON **cur,
                                     cJSON *encoded);

/*
 * The reference's name for a cluster's endpoint record: "<cluster>-<6 lowercase hex>.<dns
 * domain>" (upstream-capmaas.md 3.4), which it also wrote into the MaasCluster's
 * spec.controlPlaneEndpoint.host. True when host is such a name for this cluster and
 * domain: a MaasCluster that lost its status (copied by clusterctl move from a management
 * cluster the reference ran) still names the record capmaas must adopt, not a host the
 * user set. Pure; any argument may be NULL (false).
 */
bool legacy_reference_record_name(const char *host, const char *cluster, const char *dns_domain);
