#pragma once
/*
 * maasmachinetemplate: the MaasMachineTemplate status for Cluster API's autoscaling from zero
 * (docs/failure-domains-and-autoscaling.md). From the MAAS inventory cache (maas_inventory.h,
 * the one the admission webhooks read) each template gets
 *   status.capacity  {cpu: "<fewest cores>", memory: "<least memory>"} (Kubernetes quantities)
 *   status.nodeInfo  {architecture: amd64|arm64|s390x|ppc64le, operatingSystem: linux|windows}
 * of the machines that match its constraints (resourcePool, failureDomain, tags, minCPU,
 * minMemory: maas_inv_fit, the admission's "could any machine ever fit"), so the cluster
 * autoscaler never promises more than the worst machine MAAS could hand out. A template no
 * machine matches loses both and says so in CapacityKnown False, NoMatchingMachine. Written
 * through /status only when something changed; never touches metadata or spec.
 *
 * Internal to the reconcile library; provider.c runs it on its own controller, woken by every
 * template event and by every inventory refresh. Threads: a template worker.
 */

#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "controller.h"
#include "maas_inventory.h"
#include "schema.h"

#define MMT_COND_CAPACITY_KNOWN   "CapacityKnown"
#define MMT_REASON_MACHINES_MATCH "MachinesMatch"
#define MMT_REASON_NO_MATCHING    "NoMatchingMachine"

/* One pass over MaasMachineTemplate ns/name; wctx is a struct reconciler_worker. */
MUST_CHECK int maasmachinetemplate_reconcile(void *wctx,
                                             const char *ns,
                                             const char *name,
                                             struct reconcile_result *res);

/* Pure: rewrites status (an object, modified in place) for a template of spec on snapshot s:
 * capacity, nodeInfo and the CapacityKnown condition (observedGeneration generation;
 * lastTransitionTime now only when its status changes). */
void maasmachinetemplate_status(const struct maas_machine_spec *spec,
                                const struct maas_inventory_snapshot *s,
                                cJSON *status,
                                int64_t generation,
                                time_t now);

/* MiB as a canonical Kubernetes quantity: 16384 -> "16Gi", 1536 -> "1536Mi", 0 -> "0".
 * out holds at least 32 bytes. */
void mmt_memory_quantity(int64_t mib, char *out, size_t len);
/* MAAS's "amd64/generic" as a Node's architecture ("amd64"); ppc64el -> ppc64le; NULL for
 * one the contract does not list (i386, armhf) or none. */
const char *mmt_node_architecture(const char *maas_arch);
