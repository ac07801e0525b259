#pragma once
/*
 * fleet_snapshot: the MAAS fleet snapshot (beyond.md B6, internal): every Deployed machine
 * our MaasMachines hold, listed 100 ids a call and kept sorted by system_id in p->fleet
 * (guarded by p->fleet_lock). A lookup that finds the list due refreshes it first, without
 * the lock; other workers keep reading the previous list meanwhile.
 */

#include "compiler.h"
#include "maas_client.h"

struct reconciler_worker;

/* A copy of system_id's entry (maas_node_release it) when the snapshot has it, else
 * CM_ENOTFOUND (never fetched, failed, or not Deployed at the last list). */
MUST_CHECK int fleet_snapshot_lookup(struct reconciler_worker *w,
                                     const char *system_id,
                                     struct maas_node *ret);
