#pragma once
/*
 * fleet_snapshot: the MAAS fleet snapshot (beyond.md B6, issue 18, internal): two lists of
 * the machines our MaasMachines hold, 100 ids a call, kept sorted by system_id (guarded by
 * p->fleet_lock): p->fleet, every Deployed one, once per --machine-refresh-interval; and
 * p->inflight, every one Allocated or Deploying, every 2 s while a deploy is under 16 s old,
 * then an eighth of the youngest deploy's age, at most 5 s; and p->unplaced, the UIDs of
 * MaasMachines with no machine yet, to tell in one list that none has a machine to adopt;
 * and p->deleting, the machines of deleting MaasMachines, a second apart. A lookup
 * that finds the list due refreshes it first, without the lock; other workers needing it wait for
 * that list (p->fleet_cond), so a steady machine's pass, scheduled by fleet_snapshot_next_ms just
 * after the list falls due, sees MAAS as it is within one --machine-refresh-interval.
 */

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "compiler.h"
#include "maas_client.h"

struct provider;
struct reconciler_worker;

/* A copy of system_id's entry (maas_node_release it) when the Deployed list has it (or an
 * in-flight list younger than --machine-refresh-interval: a machine just Deployed), else
 * CM_ENOTFOUND (never fetched, failed, or not Deployed at the last list). */
MUST_CHECK int fleet_snapshot_lookup(struct reconciler_worker *w,
                                     const char *system_id,
                                     struct maas_node *ret);
/* Milliseconds until the list next falls due (the interval when it never was fetched or is
 * due now; at least 100). */
uint64_t fleet_snapshot_next_ms(struct reconciler_worker *w);
/* The same as ms until the in-flight list next falls due. */
uint64_t fleet_snapshot_inflight_next_ms(struct reconciler_worker *w);

/* Whether a cached MaasMachine is in flight: it names a machine capmaas allocated
 * (deploy-started), is not ready, deleting or terminal, and its status says Allocated or
 * Deploying (or nothing yet). */
bool fleet_snapshot_in_flight(const cJSON *maasmachine);
/* For a machine in flight: refreshes the in-flight list when due (or waits for the due one
 * another worker is fetching), then a copy of system_id's entry. CM_ENOTFOUND when the list
 * asked for it and MAAS did not return it (a GET confirms it is gone), or no list could be
 * read; with *ret_later set when the last list was fetched before the machine was in flight:
 * the caller waits fleet_snapshot_inflight_next_ms for the next one instead of reading. */
MUST_CHECK int fleet_snapshot_lookup_inflight(struct reconciler_worker *w,
                                              const char *system_id,
                                              struct maas_node *ret,
                                              bool *ret_later);

/* For a deleting MaasMachine's machine: the same as fleet_snapshot_lookup_inflight over the
 * deleting list (the systemIDs of every deleting MaasMachine, due a second after the last),
 * so a release is decided on what MAAS said after the deletion was seen, and a cluster's
 * machines are read a hundred a call. */
MUST_CHECK int fleet_snapshot_lookup_deleting(struct reconciler_worker *w,
                                              const char *system_id,
                                              struct maas_node *ret,
                                              bool *ret_later);
/* Milliseconds until the deleting list next falls due. */
uint64_t fleet_snapshot_deleting_next_ms(struct reconciler_worker *w);

/* For MaasMachine ns/name with no machine yet (uid: its UID): *ret_none is true when the
 * unplaced list (every such MaasMachine's UID as agent_name=, 100 a call, every 0.5 s; a UID
 * it once found nothing for is remembered in p->unplaced_none and not asked again),
 * fetched after any allocate this process sent for uid, asked for uid and found only
 * machines whose owner data names other MaasMachines: there is nothing to adopt, and no
 * per-MaasMachine list is needed. *ret_later when that list was fetched before the
 * MaasMachine appeared: the caller waits fleet_snapshot_unplaced_next_ms for the next.
 * Both false (the caller lists by its UID) otherwise: a machine that may be its own, no
 * list read, or an allocate for uid sent by this process. CM_EUNAUTHORIZED when the refresh
 * of that list this call made (or waited for) was refused: the caller's own list would be. */
MUST_CHECK int fleet_snapshot_none_stamped(struct reconciler_worker *w,
                                           const char *uid,
                                           const char *ns,
                                           const char *name,
                                           bool *ret_none,
                                           bool *ret_later);
/* Milliseconds until the unplaced list next falls due. */
uint64_t fleet_snapshot_unplaced_next_ms(struct reconciler_worker *w);
/* Records that an allocate for uid is about to be sent (p->allocate_tried). */
void fleet_snapshot_allocating(struct provider *p, const char *uid);

struct reconciler_fleet;
/* Frees a list (provider_free). */
void fleet_snapshot_release(struct reconciler_fleet *f);

/* Keeps p->fleet_index from p->maasmachines's events (call once, before the informer
 * starts); errors as informer_add_handler. */
MUST_CHECK int fleet_snapshot_index_watch(struct provider *p);
/* Frees the index (provider teardown). */
void fleet_snapshot_index_release(struct provider *p);
/* Registers capmaas_maasmachines{phase} with every phase at zero; the index keeps it: a
 * MaasMachine counts in one phase, from its latest event, until it is deleted. Phases:
 * pending (no MAAS machine yet), allocated, deploying (deploy sent, not Ready yet), ready,
 * failed (status.failureReason: the host was lost), deleting. Errors as metrics_register. */
MUST_CHECK int fleet_snapshot_phase_metrics(struct provider *p);
