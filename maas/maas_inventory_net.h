#pragma once
/*
 * maas_inventory_net: the network part of an inventory snapshot (subnets, the addresses
 * machines hold), built with the rest by maas_inventory_snapshot_build. Private to the maas
 * library; same threading as the snapshot (built by one thread, then read-only).
 */

#include "maas_inventory.h"

/* Fills s's subnets and ips from l (s's machines must be built). */
void maas_inv_net_build(struct maas_inventory_snapshot *s, const struct maas_inventory_lists *l);
/* Frees what maas_inv_net_build made. */
void maas_inv_net_free(struct maas_inventory_snapshot *s);
