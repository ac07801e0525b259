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
