#pragma once
/*
 * maasmachine_steps: the steps of a MaasMachine pass (internal), one module each. A step
 * calls maasmachine_context.h, the steps listed above it here, and the layers below; never
 * maasmachine.c, which runs the state machine over them. Each returns 0 or a negative
 * error and may set res.
 */

#include <stdbool.h>

#include "controller.h"
#include "maasmachine_context.h"

/* maasmachine_release.c: releases system_id (erase per the settings); 404 counts as done. */
MUST_CHECK int maasmachine_release(struct maasmachine_ctx *c, const char *system_id);

/* maasmachine_ipam.c: Cluster API's IPAM contract for spec.addressesFromPools (the first
 * pool). Finds the MaasMachine's IPAddressClaim by owner, else creates it; *ret_ready says
 * whether it is answered (IPAddressClaimed True). Otherwise IPAddressClaimed False
 * (WaitingForIPAddress, or IPAddressClaimFailed) and a requeue are set and the caller
 * returns without touching MAAS. need_address: read the IPAddress now (the pass may
 * allocate and deploy); else an answered claim already reported True needs no read.
 * Nothing to do (ready false) without addressesFromPools. */
MUST_CHECK int maasmachine_ipam_claim(struct maasmachine_ctx *c,
                                      bool need_address,
                                      struct reconcile_result *res,
                                      bool *ret_ready);
/* Deletes the MaasMachine's IPAddressClaims (after its MAAS machine was released): the
 * IPAM provider then returns the address to its pool. */
MUST_CHECK int maasmachine_ipam_release(struct maasmachine_ctx *c);
/* The static address of the pass in *ret: spec.staticIP, else the address the
 * IPAddressClaim was answered with (one GET of the IPAddress per pass, kept in
 * c->claimed_ip), else NULL. CM_ENOTFOUND when the claim is not answered (any more); a kube
 * error otherwise (the pass returns it). */
MUST_CHECK int maasmachine_static_ip(struct maasmachine_ctx *c,
                                     const struct schema_static_ip **ret);

/* maasmachine_network.c: StaticIPApplied True while the machine the address was linked on
 * is c->node (each pass). */
void maasmachine_static_ip_status(struct maasmachine_ctx *c);
/* Before allocating: true (and a requeue set) while a refused static address's backoff runs. */
bool maasmachine_static_ip_backoff(struct maasmachine_ctx *c, struct reconcile_result *res);
/* Allocated c->node, before deploy: links the static address (undoing first a link left on an
 * earlier host). *ret_go false when the pass stops here: an earlier host is still releasing
 * (requeue), or MAAS refused (machine released, StaticIPApplied False/StaticIPFailed, Warning
 * event, backoff). Nothing to do without a static address. */
MUST_CHECK int maasmachine_network_apply(struct maasmachine_ctx *c,
                                         struct reconcile_result *res,
                                         bool *ret_go);
/* Undoes the link the static-ip-host annotation records ("<system_id> <ip> <cidr>
 * <interface|->": neither the spec nor a claim is needed), where MAAS allows it.
 * *ret_done: nothing of ours is linked any more. Not done: *ret_release says the machine is
 * c->node, deployed: release it, then come back once it is Ready. */
MUST_CHECK int maasmachine_network_undo(struct maasmachine_ctx *c,
                                        bool *ret_done,
                                        bool *ret_release);

/* maasmachine_deploy.c: swap off, then deploy c->node with the Machine's bootstrap data; on
 * failure the machine is released, the ids cleared and the deploy backoff started. */
MUST_CHECK int maasmachine_deploy(struct maasmachine_ctx *c);
/* Before allocating: true (and a requeue set) while the backoff after a refused deploy runs:
 * each pass would otherwise allocate, be refused and release again, as fast as its own
 * status writes bring it back. */
bool maasmachine_deploy_backoff(struct maasmachine_ctx *c, struct reconcile_result *res);

/* maasmachine_owner.c: whether c->node is still held for this MaasMachine: unowned (released)
 * is not; owner data naming another MaasMachine is not; else the agent_name stamp decides
 * (one MAAS list), and a MaasMachine capmaas never allocated for is taken as owning it. */
MUST_CHECK int maasmachine_owned(struct maasmachine_ctx *c, bool *ret_owned);
/* Writes the owner data capmaas stamps a machine with (cluster, namespace, MaasMachine);
 * best effort: a failure is logged. */
void maasmachine_stamp_owner_data(struct maasmachine_ctx *c, const char *sid);
/* Whether Cluster API may have consumed the providerID: status provisioned or ready, or the
 * Machine carries it. A host is replaced under the same MaasMachine only before that. */
bool maasmachine_provisioned(const struct maasmachine_ctx *c);
/* Provisioned and already reported lost (failureReason set): nothing more to do in MAAS. */
bool maasmachine_terminal(const struct maasmachine_ctx *c);
/* The host of a provisioned MaasMachine is gone (c->have_node false: 404), released, held
 * by someone else or Broken: Ready False (MachineTerminatedReason), failureReason
 * UpdateError and failureMessage, once a Warning event and
 * capmaas_maasmachine_host_lost_total{reason}. providerID and systemID are kept. */
MUST_CHECK int maasmachine_host_lost(struct maasmachine_ctx *c, struct reconcile_result *res);

/* maasmachine_compose.c (docs/lxd.md): spec.lxd.enabled makes the MaasMachine a VM composed
 * on a MAAS VM host. */
bool maasmachine_is_vm(const struct maasmachine_ctx *c);
/* A MAAS machine composed on a VM host (power type lxd or virsh): deleted, never released.
 * Only such a machine is ever deleted (spec.lxd turned on over a server releases it). */
bool maasmachine_node_is_vm(const struct maas_node *n);
/* The VM's hostname, derived from the MaasMachine's name and UID (new string). */
char *maasmachine_vm_hostname(const char *name, const char *uid);
/* Instead of allocate: finds the VM by its hostname (adopting it, waiting while MAAS
 * commissions it, allocating it by system id once Ready), else chooses a host and composes
 * one. *ret_got says whether c->node is now the allocated VM; a requeue is set otherwise. */
MUST_CHECK int maasmachine_compose(struct maasmachine_ctx *c,
                                   struct reconcile_result *res,
                                   bool *ret_got);
/* A deleting VM MaasMachine: deletes c->node when owned (MAAS decomposes it), and any VM of
 * its hostname MAAS holds unallocated or stamped for it. */
MUST_CHECK int maasmachine_vm_delete(struct maasmachine_ctx *c, bool owned);
/* A failed or timed-out VM deploy: deletes the VM and clears the ids (the next pass
 * composes another). */
MUST_CHECK int maasmachine_vm_replace(struct maasmachine_ctx *c,
                                      const char *why,
                                      struct reconcile_result *res);
/* Forgets this process's record of the host chosen for the MaasMachine's VM. */
void maasmachine_vm_forget(struct maasmachine_ctx *c);

/* maasmachine_allocate.c: finds the MAAS machine the MaasMachine names, else adopts one
 * stamped with its UID (have_node then says whether there is one). */
MUST_CHECK int maasmachine_find_node(struct maasmachine_ctx *c);
/* Allocates a machine with every constraint, stamps it and persists the providerID;
 * *ret_got says whether one was allocated (a requeue is set when none is free). */
MUST_CHECK int maasmachine_allocate(struct maasmachine_ctx *c,
                                    struct reconcile_result *res,
                                    bool *ret_got);
/* maasmachine_storage.c: with spec.storageLayout, picks the machine an allocate with o would
 * get (a dry run), applies the layout to it while it is Ready and returns its system_id in
 * *ret_system_id (malloc'd) for the allocate to ask for. NULL and 0 without a layout, or when
 * MAAS refused it (MachineDeployed False, a Warning event, a requeue set); MAAS_ENOMATCH when
 * no machine matches; another error with MachineDeployed False. */
MUST_CHECK int maasmachine_storage_layout(struct maasmachine_ctx *c,
                                          const struct maas_allocate_opts *o,
                                          struct reconcile_result *res,
                                          char **ret_system_id);
/* The same on a machine already chosen (a composed VM, Ready, before its allocation):
 * *ret_go false when MAAS refused (MachineDeployed False, a Warning event, a requeue set). */
MUST_CHECK int maasmachine_storage_layout_on(struct maasmachine_ctx *c,
                                             const char *sid,
                                             struct reconcile_result *res,
                                             bool *ret_go);
/* Replaces a failed or timed-out deploy (why: "DeployFailed" | "DeployTimeout"): allocates
 * the replacement, releases the old machine, deploys the new one. */
MUST_CHECK int maasmachine_replace(struct maasmachine_ctx *c,
                                   const char *why,
                                   struct reconcile_result *res);

/* maasmachine_power.c: the Deployed-machine power policy (B4). */
MUST_CHECK int maasmachine_power(struct maasmachine_ctx *c, struct reconcile_result *res);

/* maasmachine_dns.c: false when the cluster's endpoint is not the DNS record
 * (spec.endpoint.type VIP or External); true in *ret when a control plane's IP is in the API
 * endpoint record. */
bool maasmachine_dns_expected(struct maasmachine_ctx *c);
MUST_CHECK int maasmachine_dns_registered(struct maasmachine_ctx *c, bool *ret);

/* maasmachine_node.c: sets the workload Node's spec.providerID (and zone label) once. */
MUST_CHECK int maasmachine_node_provider_id(struct maasmachine_ctx *c,
                                            struct reconcile_result *res);

/* maasmachine_delete.c: a deleting MaasMachine: DNS detach, release, finalizer. */
MUST_CHECK int maasmachine_delete_pass(struct maasmachine_ctx *c, struct reconcile_result *res);
