#pragma once
/*
 * fleet_snapshot: the MAAS fleet snapshot (beyond.md B6, internal): every Deployed machine
 * our MaasMachines hold, listed 100 ids a call and kept sorted by system_id in p->fleet
 * (guarded by p->fleet_lock). A lookup that finds the list due refreshes it first, without
 * the lock; other workers needing it wait for that list (p->fleet_cond), so a steady
 * machine's pass, scheduled by fleet_snapshot_next_ms just after the list falls due, sees
 * MAAS as it is within one --machine-refresh-interval.
 */

#include <stdint.h>

#include "compiler.h"
#include "maas_client.h"

struct provider;
struct reconciler_worker;

/* A copy of system_id's entry (maas_node_release it) when the snapshot has it, else
 * CM_ENOTFOUND (never fetched, failed, or not Deployed at the last list). */
MUST_CHECK int fleet_snapshot_lookup(struct reconciler_worker *w,
                                     const char *system_id,
                                     struct maas_node *ret);
/* Milliseconds until the list next falls due (the interval when it never was fetched or is
 * due now; at least 100). */
uint64_t fleet_snapshot_next_ms(struct provider *p);
