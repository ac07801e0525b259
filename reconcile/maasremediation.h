#pragma once
/*
 * maasremediation: the MaasRemediation reconciler (internal; provider.c registers it with
 * the remediation controller, unit tests call it with a worker from worker.h), Cluster
 * API's external remediation with a reboot strategy (docs/remediation.md):
 *
 *   MachineHealthCheck → MaasRemediation <Machine's name>, owned by the Machine
 *     Machine → MaasMachine → MAAS system id; refused (no power call, RemediationAllowed
 *     False, an event) when the Machine is being deleted, has no MAAS machine, or MAAS
 *     cannot cycle its power type ("manual"); held while the Cluster is paused
 *     Running: power off, power state confirmed off, power on (retryCount + 1,
 *       lastRemediated = now)
 *     Waiting: the Node Ready again (since the power-on) → Succeeded; after
 *       strategy.timeout → the next power cycle, or, when retryLimit cycles are done, the
 *       Machine's OwnerRemediated condition False (WaitingForRemediation), which Cluster
 *       API's MachineSet / KubeadmControlPlane act on by replacing it → "Deleting machine"
 *   A finalizer keeps a remediation the MachineHealthCheck deletes (the Node is healthy
 *   again) until its last pass has written the outcome.
 *
 * Threads: a remediation worker; p->remediating under p->lock.
 */

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "controller.h"
#include "reconciler.h"
#include "schema.h"
#include "worker.h"

/* Condition types of a MaasRemediation and the Machine condition the contract defines. */
#define REMEDIATION_COND_ALLOWED      "RemediationAllowed"
#define REMEDIATION_COND_POWER_CYCLED "PowerCycled"
#define REMEDIATION_COND_NODE_READY   "NodeReady"
#define REMEDIATION_COND_OWNER        "OwnerRemediated"
#define REMEDIATION_REASON_WAITING    "WaitingForRemediation"

/* One pass's state (one worker). Pointers borrowed from the pass unless marked owned. */
struct remediation_ctx {
        struct reconciler_worker *w;
        struct provider *p;
        const char *ns, *name;
        struct kube_object *obj;     /* owned reference: the cached MaasRemediation */
        struct kube_object *machine; /* owned reference, or NULL */
        struct kube_object *cluster; /* owned reference, or NULL */
        const char *system_id;       /* in the MaasMachine's cached JSON, or NULL */
        struct kube_object *mm;      /* owned reference: the MaasMachine, or NULL */
        struct maas_remediation r;   /* decoded; owned */
        cJSON *cur;                  /* owned: the object as last read or written */
        struct reconciler_conditions conds;
        time_t now;
        int64_t retry_limit;
        uint64_t timeout_ms;
};

/* One pass over MaasRemediation ns/name; wctx is a struct reconciler_worker. */
MUST_CHECK int maasremediation_reconcile(void *wctx,
                                         const char *ns,
                                         const char *name,
                                         struct reconcile_result *res);

/* ---- steps (maasremediation_steps.c) ---- */

/* Power off, confirm off (MAAS's query_power_state, up to a few seconds), power on, each
 * step an event. 0 when the machine was powered on again; CM_ETIMEDOUT when it did not report
 * off in time (a condition says so); a MAAS error otherwise. */
MUST_CHECK int remediation_power_cycle(struct remediation_ctx *c);
/* Whether MAAS can cycle the machine's power: false with *ret_type (new string, "" when
 * MAAS names none) for "manual" or none. A MAAS error otherwise. */
MUST_CHECK int remediation_power_type_ok(struct remediation_ctx *c, bool *ret_ok, char **ret_type);
/* Whether the Machine's Node is Ready with a transition at or after since (unix s; 0 =
 * any). False when the Machine has no nodeRef yet or the Node is gone. Workload API
 * errors are returned (the client is dropped). */
MUST_CHECK int remediation_node_ready(struct remediation_ctx *c, int64_t since, bool *ret);
/* The Machine's OwnerRemediated condition False (WaitingForRemediation) in the served
 * version's shape; nothing when it already is. */
MUST_CHECK int remediation_hand_back(struct remediation_ctx *c, const char *message);
