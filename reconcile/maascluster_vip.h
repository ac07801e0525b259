#pragma once
/*
 * maascluster_vip: the API endpoint types other than the DNS record (docs/endpoints.md):
 * VIP, an address reserved in MAAS as a user reservation (ipaddresses op=reserve) so MAAS
 * hands it to no machine, device or DHCP lease, held on the control planes (kube-vip); and
 * External, an endpoint the user runs (nothing in MAAS). The reserved address is persisted
 * in the vip annotation (metadata, which clusterctl move copies) and in
 * spec.controlPlaneEndpoint.host; a pass after a restart or a move finds the reservation
 * again by address (GET ipaddresses/?ip=) and never reserves a second one.
 *
 * Every cluster reserves as the same MAAS user, so a reservation found by address is
 * adopted only with proof that it is this MaasCluster's: its vip annotation names it, or
 * MAAS's DNS record capmaas-vip-<MaasCluster UID> holds it (the reserve is made with that
 * hostname, so MAAS writes the record in the same call; the release deletes it). Another
 * cluster's reservation found in the window before its annotation is written is refused,
 * and never released. Called by maascluster.c on its worker thread; every function is for
 * one pass.
 */

#include <stdbool.h>

#include "compiler.h"
#include "reconciler.h"
#include "schema.h"

/* The VIP capmaas reserved (or adopted): copied by clusterctl move with the metadata. */
#define RECONCILER_ANNOTATION_VIP "maas.infrastructure.cluster.x-k8s.io/vip"

/* The reserve's hostname: MAAS's record of this label + the MaasCluster's UID proves the
 * reservation is that cluster's. */
#define MAASCLUSTER_VIP_PROOF_PREFIX "capmaas-vip-"

#define SCHEMA_REASON_VIP_RESERVATION_FAILED "VIPReservationFailed"
#define SCHEMA_REASON_WAITING_FOR_ENDPOINT   "WaitingForEndpoint"

enum endpoint_type {
        ENDPOINT_DNS,
        ENDPOINT_VIP,
        ENDPOINT_EXTERNAL,
};

/* spec.endpoint.type: absent, "DNS" or anything the webhook would refuse → DNS. */
enum endpoint_type maascluster_endpoint_type(const struct maas_cluster_spec *s);

/* What a VIP step reads and writes (borrowed from the MaasCluster pass). */
struct vip_pass {
        struct reconciler_worker *w;
        struct provider *p;
        const char *ns, *name;
        struct maas_cluster *mc;
        const cJSON *obj; /* the object events are about */
        const struct reconciler_conditions *conds;
};

/* The address: spec.endpoint.address, else the vip annotation; NULL when none yet. */
const char *maascluster_vip_address(const struct maas_cluster *mc);

/* Makes sure the VIP is reserved for capmaas's MAAS user, on every pass (one GET once the
 * annotation names it): found by address and proven this cluster's (no second
 * reservation), else reserved (spec.endpoint.address, or one MAAS picks from
 * spec.endpoint.subnet, unless the record of this cluster's label already holds one), so a
 * reservation released behind capmaas's back is made again before MAAS can hand the
 * address out; *ret_fresh_pick is set when the address is new to the annotation (picked, or
 * found by the record), which the caller must persist before anything else. A reservation
 * without proof: refused as below (CM_EEXIST). The annotation is set in v->mc. MAAS's refusal:
 * LoadBalancerReady False / VIPReservationFailed with MAAS's message, a Warning event, and the
 * error returned (the controller's backoff). */
MUST_CHECK int maascluster_vip_ensure(struct vip_pass *v, bool *ret_fresh_pick);

/* Releases the VIP at cluster deletion (after the last MaasMachine is gone): only when the
 * reservation is the caller's (GET ipaddresses/?ip=) and this cluster's (as above); nothing
 * held is success. */
MUST_CHECK int maascluster_vip_release(struct vip_pass *v);
